import type { StoreLocation } from '../../core/db'

/**
 * The command and environment of a MySQL / MariaDB dump of the store's database: one
 * `--single-transaction` snapshot (InnoDB: consistent, and no table lock stalls a request), no
 * `LOCK TABLES`, no tablespaces (which need a privilege the store's user may lack). The password
 * travels in MYSQL_PWD, never in argv (which `ps` shows to every user). `tool` is the configured
 * executable, or else mariadb-dump or mysqldump on PATH; undefined when none is found.
 */
export function mysqlDumpCommand(
  loc: StoreLocation,
  configured: string,
  target: string,
): { args: string[]; env: Record<string, string | undefined>; tool: string } | { missing: string } {
  const tool = configured || Bun.which('mariadb-dump') || Bun.which('mysqldump')
  if (!tool) return { missing: 'neither mariadb-dump nor mysqldump is on PATH' }
  const url = new URL(loc.url.replace(/^mariadb:/, 'mysql:'))
  const database = decodeURIComponent(url.pathname.replace(/^\//, ''))
  const args = [
    tool,
    '--single-transaction',
    '--skip-lock-tables',
    '--no-tablespaces',
    '--skip-comments',
    `--host=${url.hostname || '127.0.0.1'}`,
    `--port=${url.port || '3306'}`,
    `--result-file=${target}`,
  ]
  if (url.username) args.push(`--user=${decodeURIComponent(url.username)}`)
  args.push('--', database)
  const password = decodeURIComponent(url.password)
  return { args, env: password ? { ...process.env, MYSQL_PWD: password } : { ...process.env }, tool }
}

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
  if (mysqlOwn(tool)) args.push('--set-gtid-purged=OFF')
  if (url.username) args.push(`--user=${decodeURIComponent(url.username)}`)
  args.push('--', database)
  const password = decodeURIComponent(url.password)
  return { args, env: password ? { ...process.env, MYSQL_PWD: password } : { ...process.env }, tool }
}

const own = new Map<string, boolean>()

/**
 * Whether `tool` is MySQL's mysqldump rather than MariaDB's (its `--version`, asked once per
 * executable). MySQL's writes the server's GTID set into the dump (GTIDs are on by default in
 * MySQL 9), which a restore onto a server that has run transactions refuses (error 3546), and to
 * read that set consistently it runs `FLUSH TABLES`, which needs a privilege a store's user lacks:
 * a dump of one database to restore elsewhere carries no GTIDs (`--set-gtid-purged=OFF`, an
 * option MariaDB's does not know).
 */
function mysqlOwn(tool: string): boolean {
  let hit = own.get(tool)
  if (hit === undefined) {
    try {
      const v = Bun.spawnSync([tool, '--version'], { stdout: 'pipe', stderr: 'pipe' })
      hit = v.exitCode === 0 && !/mariadb/i.test(v.stdout.toString())
      own.set(tool, hit)
    } catch {
      // Not there (or not runnable): the dump itself fails naming it.
      return false
    }
  }
  return hit
}

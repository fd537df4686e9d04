import { spawnSync } from 'node:child_process'
import { chownSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** Where Debian keeps PostgreSQL 15's server programs (PG_BIN overrides). */
const BIN = process.env.PG_BIN ?? '/usr/lib/postgresql/15/bin'

export interface OwnPostgres {
  /** `postgres://postgres@127.0.0.1:PORT/postgres` (trust authentication). */
  url: string
  port: number
  /** Starts it (again) and waits until it accepts connections. */
  start(): void
  /** Stops it: `fast` ends sessions cleanly, `immediate` is a crash as far as clients see. */
  stop(mode?: 'fast' | 'immediate'): void
  /** Stops it for good and removes its files. */
  destroy(): void
}

/** A loopback port nobody listens on now. */
export function freePort(): number {
  const s = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } })
  const port = s.port
  s.stop(true)
  return port
}

/**
 * A PostgreSQL server of the caller's own (initdb and pg_ctl in a temporary directory, on a free
 * loopback port), for tests and benchmarks that stop and restart their database: the shared
 * server on 5432 is never touched. Run as root (CI), the server runs as the `postgres` user.
 */
export function ownPostgres(): OwnPostgres {
  const dir = mkdtempSync(join(tmpdir(), 'liveops-pg-'))
  const data = join(dir, 'data')
  const asRoot = process.getuid?.() === 0
  if (asRoot) {
    const pw = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' })
    const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' })
    chownSync(dir, Number(pw.stdout.trim()), Number(gid.stdout.trim()))
  }
  const run = (cmd: string, args: string[]) => {
    const argv = asRoot
      ? ['runuser', '-u', 'postgres', '--', join(BIN, cmd), ...args]
      : [join(BIN, cmd), ...args]
    const r = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8', cwd: dir })
    if (r.status !== 0) throw new Error(`${cmd} failed (${r.status}): ${r.stderr || r.stdout}`)
  }
  run('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8'])
  const port = freePort()
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`
  const pg: OwnPostgres = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    start: () =>
      run('pg_ctl', ['-D', data, '-l', join(dir, 'log'), '-o', options, '-w', '-t', '30', 'start']),
    stop: (mode = 'fast') => run('pg_ctl', ['-D', data, '-m', mode, '-w', '-t', '30', 'stop']),
    destroy() {
      try {
        pg.stop('immediate')
      } catch {
        // Already stopped.
      }
      rmSync(dir, { recursive: true, force: true })
    },
  }
  pg.start()
  // A run that ends without its cleanup (a failed hook, a killed runner) leaves no server behind.
  process.once('exit', () => pg.destroy())
  return pg
}

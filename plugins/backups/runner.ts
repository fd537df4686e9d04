import {
  appendFileSync,
  closeSync,
  existsSync,
  fsyncSync,
  openSync,
  readdirSync,
  renameSync,
  rmSync,
  statfsSync,
} from 'node:fs'
import { dirname, join } from 'node:path'
import type { Db } from '../../core/db'
import { privateDir, privateFile, tighten } from '../../core/files'
import type { Logger } from '../../core/log'
import { mysqlDumpCommand } from './mysql-dump'
import type { BackupRow, BackupStore, Driver } from './store'
import type { VacuumReply, VacuumRequest } from './vacuum.worker'

const DAY_MS = 86_400_000
/** Free space a backup always leaves on its file system. */
const MIN_FREE = 256 * 1_048_576

/**
 * What a backup's copy says of the backup that made it: in a store restored from the copy that
 * backup is forever running, and no instance there made it, so none would settle it.
 */
const COPIED_WHILE_RUNNING =
  'interrupted: this record was copied into its own backup while it ran; a store restored from that backup never finishes it'

export interface RunnerSettings {
  dir: string
  pgDump: string
  /** mariadb-dump or mysqldump; empty: whichever is on PATH. */
  mysqlDump: string
  keepLast: number
  keepDays: number
}

function workerEntry(): string {
  if (import.meta.url.startsWith('file:///$bunfs/')) return './plugins/backups/vacuum.worker.ts'
  return new URL('./vacuum.worker.ts', import.meta.url).href
}

/** The file of a finished backup; a `.partial` name until it is complete and synced. */
const fileOf = (r: Pick<BackupRow, 'id' | 'driver'>) => `${r.id}.${r.driver === 'sqlite' ? 'sqlite' : 'sql'}`
const partialOf = (id: string) => `.${id}.partial`

/** sha256 and size of a file, read in chunks so the event loop keeps answering. */
export async function hashFile(path: string): Promise<{ sha256: string; size: number }> {
  const hash = new Bun.CryptoHasher('sha256')
  let size = 0
  const reader = Bun.file(path).stream().getReader()
  for (let r = await reader.read(); !r.done; r = await reader.read()) {
    hash.update(r.value)
    size += r.value.byteLength
  }
  return { sha256: hash.digest('hex'), size }
}

function fsyncPath(path: string) {
  const fd = openSync(path, 'r')
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/**
 * Runs backups one at a time, in the background. Each writes a `.partial` file, syncs it, hashes
 * it and only then renames it to its final name and marks the record succeeded: a crash leaves
 * a partial file (removed at the next start) and a record that start marks failed, never a half
 * file listed as succeeded.
 */
export function backupRunner(db: Db, store: BackupStore, log: Logger, s: RunnerSettings) {
  let tail: Promise<void> = Promise.resolve()
  let stopping = false
  /** Ends the copy in flight: the worker thread or the pg_dump process. */
  let abort: (() => void) | undefined

  function sqliteCopy(target: string, id: string): Promise<{ sha256: string; size: number }> {
    const file = db.location?.url
    if (!file) return Promise.reject(new Error('an in-memory SQLite store cannot be backed up'))
    return new Promise((resolve, reject) => {
      const w = new Worker(workerEntry())
      abort = () => {
        w.terminate()
        reject(new Error('interrupted: the server is stopping'))
      }
      w.onmessage = (m: MessageEvent<VacuumReply>) => {
        w.terminate()
        m.data.ok ? resolve(m.data) : reject(new Error(m.data.error))
      }
      w.onerror = (e) => {
        w.terminate()
        reject(new Error(`sqlite copy failed: ${e.message}`))
      }
      w.postMessage({
        file: file.replace(/^sqlite:(\/\/)?/, ''),
        target,
        id,
        closing: COPIED_WHILE_RUNNING,
      } satisfies VacuumRequest)
    })
  }

  async function pgDump(target: string, id: string): Promise<{ sha256: string; size: number }> {
    const loc = db.location
    if (!loc) throw new Error('no PostgreSQL location to dump')
    const url = new URL(loc.url)
    // The password travels in the environment, never in argv (which `ps` shows to every user).
    const password = decodeURIComponent(url.password)
    url.password = ''
    const args = [s.pgDump, '--format=plain', '--no-owner', `--file=${target}`, `--dbname=${url.href}`]
    if (loc.schema) args.push(`--schema=${loc.schema}`)
    let proc: ReturnType<typeof Bun.spawn>
    try {
      proc = Bun.spawn(args, {
        env: password ? { ...process.env, PGPASSWORD: password } : { ...process.env },
        stdin: 'ignore',
        stdout: 'ignore',
        stderr: 'pipe',
      })
    } catch (e) {
      const code = (e as { code?: string }).code
      if (code === 'ENOENT' || code === 'EACCES')
        throw new Error(
          `pg_dump not found at '${s.pgDump}': install the PostgreSQL client tools or set plugins.backups.pg_dump`,
        )
      throw e
    }
    abort = () => proc.kill()
    const [exit, stderr] = await Promise.all([
      proc.exited,
      new Response(proc.stderr as ReadableStream).text(),
    ])
    if (stopping) throw new Error('interrupted: the server is stopping')
    if (exit !== 0) throw new Error(`pg_dump exited with ${exit}: ${stderr.trim().slice(0, 2000)}`)
    // The dump empties search_path: the table is named with its schema.
    const table = `"${(loc.schema ?? 'public').replace(/"/g, '""')}".backups`
    appendFileSync(
      target,
      `\nUPDATE ${table} SET status = 'failed', error = '${COPIED_WHILE_RUNNING.replace(/'/g, "''")}', completed_at = started_at WHERE id = '${id.replace(/'/g, "''")}';\n`,
    )
    fsyncPath(target)
    return hashFile(target)
  }

  /** The MySQL / MariaDB dump (mysql-dump.ts), closed like pg_dump's with its own record failed. */
  async function mysqlDump(target: string, id: string): Promise<{ sha256: string; size: number }> {
    const loc = db.location
    if (!loc) throw new Error('no MySQL location to dump')
    const cmd = mysqlDumpCommand(loc, s.mysqlDump, target)
    const hint = 'install the MariaDB or MySQL client tools or set plugins.backups.mysql_dump'
    if ('missing' in cmd) throw new Error(`mysql dump tool not found: ${cmd.missing}: ${hint}`)
    let proc: ReturnType<typeof Bun.spawn>
    try {
      proc = Bun.spawn(cmd.args, { env: cmd.env, stdin: 'ignore', stdout: 'ignore', stderr: 'pipe' })
    } catch (e) {
      const code = (e as { code?: string }).code
      if (code === 'ENOENT' || code === 'EACCES') throw new Error(`${cmd.tool} not found: ${hint}`)
      throw e
    }
    abort = () => proc.kill()
    const [exit, stderr] = await Promise.all([
      proc.exited,
      new Response(proc.stderr as ReadableStream).text(),
    ])
    if (stopping) throw new Error('interrupted: the server is stopping')
    if (exit !== 0) throw new Error(`${cmd.tool} exited with ${exit}: ${stderr.trim().slice(0, 2000)}`)
    appendFileSync(
      target,
      `\nUPDATE backups SET status = 'failed', error = '${COPIED_WHILE_RUNNING.replace(/'/g, "''")}', completed_at = started_at WHERE id = '${id.replace(/'/g, "''")}';\n`,
    )
    fsyncPath(target)
    return hashFile(target)
  }

  const copy = { sqlite: sqliteCopy, postgres: pgDump, mysql: mysqlDump } as const

  /**
   * Why a new backup would not fit, or undefined: the directory's file system keeps at least
   * twice the newest finished backup free, and never less than MIN_FREE. Back-to-back backups
   * through the API had written 2.2 GB in 11 s, and with the disk full every write of the store
   * fails. Asked when a backup is asked for, and again when it starts: a burst of requests had
   * each passed the first check against the same free space.
   */
  async function lowSpace(): Promise<string | undefined> {
    let dir = s.dir
    while (!existsSync(dir) && dirname(dir) !== dir) dir = dirname(dir)
    const fs = statfsSync(dir)
    const free = Number(fs.bavail) * Number(fs.bsize)
    const last = (await store.lastSucceeded())?.size ?? 0
    const need = Math.max(MIN_FREE, 2 * Number(last))
    if (free >= need) return undefined
    const mb = (n: number) => `${Math.round(n / 1_048_576)} MB`
    return `${mb(free)} free where backups go; a backup needs ${mb(need)} (twice the last one, at least ${mb(MIN_FREE)})`
  }

  async function run(row: BackupRow): Promise<void> {
    if (stopping) return
    const partial = join(s.dir, partialOf(row.id))
    try {
      await store.running(row.id)
      const low = await lowSpace()
      if (low) throw new Error(low)
      privateDir(s.dir)
      // Created private before the copy writes into it (VACUUM INTO and pg_dump keep the mode).
      privateFile(partial)
      const f = await copy[row.driver](partial, row.id)
      tighten(partial)
      renameSync(partial, join(s.dir, fileOf(row)))
      fsyncPath(s.dir)
      await store.succeeded(row.id, { location: fileOf(row), size: f.size, checksum: f.sha256 })
      log.info('backup succeeded', { id: row.id, name: row.name, size: f.size })
    } catch (e) {
      // Nothing of a failed backup stays on disk: neither its partial file nor, when only the
      // record could not be written, a finished file no record lists.
      for (const f of [partial, join(s.dir, fileOf(row))])
        try {
          rmSync(f, { force: true })
        } catch {
          // The directory itself is what failed; there is nothing in it to remove.
        }
      const error = (e as Error).message
      log.error('backup failed', { id: row.id, name: row.name, error })
      await store.failed(row.id, error).catch(() => undefined)
      return
    } finally {
      abort = undefined
    }
    // A retention failure is logged; it never turns the backup just made into a failed one.
    await prune().catch((e) => log.error('backup retention failed', { error: String(e) }))
  }

  /**
   * Retention: keep the newest `keepLast` succeeded backups and none older than `keepDays`
   * (0 turns either off). The newest succeeded backup is always kept, so a schedule that stopped
   * never leaves the store without one. Failed records older than `keepDays` go too.
   */
  async function prune(now = Date.now()): Promise<number> {
    const all = await store.list()
    const ok = all.filter((r) => r.status === 'succeeded')
    const old = (r: BackupRow) => s.keepDays > 0 && Number(r.created_at) < now - s.keepDays * DAY_MS
    const doomed = [
      ...ok.slice(1).filter((r, i) => (s.keepLast > 0 && i + 1 >= s.keepLast) || old(r)),
      ...all.filter((r) => r.status === 'failed' && old(r)),
      // Another instance's file in a directory this one cannot see is left to that instance.
    ].filter((r) => !r.location || reachable(r))
    for (const r of doomed) await remove(r)
    if (doomed.length) log.info('backups pruned', { removed: doomed.length })
    return doomed.length
  }

  /** Whether this instance can read the backup's file: it made it, or the directory is shared. */
  function reachable(r: BackupRow): boolean {
    return (
      (r.instance_id ?? store.instance) === store.instance ||
      (!!r.location && existsSync(join(s.dir, r.location)))
    )
  }

  async function remove(r: BackupRow): Promise<void> {
    if (r.location) rmSync(join(s.dir, r.location), { force: true })
    await store.remove(r.id)
  }

  return {
    driver: db.dialect as Driver,
    dir: s.dir,
    fileOf,
    prune,
    remove,
    reachable,

    lowSpace,

    /** Queues a backup; the promise settles when it finished (or failed). */
    enqueue(row: BackupRow): Promise<void> {
      const job = tail.then(() => run(row))
      tail = job
      return job
    },

    /**
     * After a stop or crash: this instance's unfinished records are marked failed and partial
     * files removed, except those of another instance's backup in flight (a shared directory).
     */
    async recover(): Promise<void> {
      const n = await store.failUnfinished('interrupted: the server stopped before the backup finished')
      if (n) log.warn('unfinished backups marked failed', { count: n })
      let partials: string[] = []
      // An unreachable directory fails each backup with its reason; it never stops the server.
      try {
        partials = readdirSync(s.dir).filter((f) => f.endsWith('.partial'))
      } catch (e) {
        if ((e as { code?: string }).code !== 'ENOENT')
          log.warn('backup directory unreadable', { dir: s.dir, error: String(e) })
      }
      for (const f of partials) {
        const row = await store.find(f.slice(1, -'.partial'.length))
        if (row && (row.status === 'pending' || row.status === 'running')) continue
        rmSync(join(s.dir, f), { force: true })
      }
    },

    async stop(): Promise<void> {
      stopping = true
      abort?.()
      await tail
      await store.failUnfinished('interrupted: the server is stopping').catch(() => undefined)
    },
  }
}

export type BackupRunner = ReturnType<typeof backupRunner>

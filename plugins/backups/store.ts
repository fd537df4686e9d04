import type { Static } from '@sinclair/typebox'
import { type Db, iso, newId } from '../../core/db'
import { lockUntilCommit } from '../../core/db/migrate'
import { NotFound } from '../../core/http'
import type { Backup } from './schema'

/**
 * Held while a new backup is claimed, to its transaction's end: the check for one unfinished and
 * the insert are one step on every engine (SQLite's one writer needs none). Apart, ten requests at
 * once on PostgreSQL had all passed the check and queued ten whole copies of the store.
 */
const CLAIM_LOCK = { pg: 72_410_005, mysql: 'liveops_backups', waitS: 10 }

const BUSY = `SELECT 1 AS one FROM backups WHERE status IN ('pending', 'running')
  AND (instance_id = ? OR created_at > ?) LIMIT 1`

export type BackupStatus = 'pending' | 'running' | 'succeeded' | 'failed'
export type Driver = 'sqlite' | 'postgres' | 'mysql'

export type BackupRow = {
  id: string
  name: string
  type: string
  driver: Driver
  trigger: 'api' | 'schedule'
  status: BackupStatus
  location: string | null
  size: number | null
  checksum: string | null
  error: string | null
  created_at: number
  started_at: number | null
  completed_at: number | null
  instance_id: string | null
}

const opt = <T>(v: T | null) => (v === null ? undefined : v)

export function backupView(r: BackupRow): Static<typeof Backup> {
  return {
    id: r.id,
    name: r.name,
    type: r.type,
    driver: r.driver,
    trigger: r.trigger,
    status: r.status,
    location: opt(r.location),
    size: r.size === null ? undefined : Number(r.size),
    checksum: opt(r.checksum),
    error: opt(r.error),
    createdAt: iso(r.created_at)!,
    startedAt: iso(r.started_at),
    completedAt: iso(r.completed_at),
    instance: opt(r.instance_id),
  }
}

/** Backups of the store; `instance` is this instance, which makes the ones it inserts and settles only those. */
export function backupStore(db: Db, instance: string) {
  return {
    instance,
    /**
     * Inserts a pending backup unless one is unfinished (`busy`, with the same window), as one
     * step under a lock: undefined when one is. Every new backup is made this way.
     */
    async claim(
      windowMs: number,
      b: { name: string; type: string; driver: Driver; trigger: 'api' | 'schedule' },
    ): Promise<BackupRow | undefined> {
      return db.tx(async (tx) => {
        await lockUntilCommit(tx, CLAIM_LOCK)
        const now = Date.now()
        if (await tx.get(BUSY, [instance, now - windowMs])) return undefined
        return tx.get<BackupRow>(
          `INSERT INTO backups (id, name, type, driver, trigger, status, created_at, instance_id)
           VALUES (?, ?, ?, ?, ?, 'pending', ?, ?) RETURNING *`,
          [newId(), b.name, b.type, b.driver, b.trigger, now, instance],
        )
      })
    },

    async get(id: string): Promise<BackupRow> {
      const row = await this.find(id)
      if (!row) throw new NotFound(`backup ${id} not found`)
      return row
    },

    find(id: string): Promise<BackupRow | undefined> {
      return db.get<BackupRow>('SELECT * FROM backups WHERE id = ?', [id])
    },

    list(status?: BackupStatus): Promise<BackupRow[]> {
      return db.all<BackupRow>(
        'SELECT * FROM backups WHERE (CAST(? AS TEXT) IS NULL OR status = ?) ORDER BY created_at DESC, id DESC',
        [status ?? null, status ?? null],
      )
    },

    /** The newest backup that succeeded (the health check's, and the size a new one needs room for). */
    lastSucceeded(): Promise<BackupRow | undefined> {
      return db.get<BackupRow>(
        "SELECT * FROM backups WHERE status = 'succeeded' ORDER BY created_at DESC, id DESC LIMIT 1",
      )
    },

    async running(id: string): Promise<void> {
      await db.run("UPDATE backups SET status = 'running', started_at = ? WHERE id = ?", [Date.now(), id])
    },

    async succeeded(id: string, f: { location: string; size: number; checksum: string }): Promise<void> {
      await db.run(
        "UPDATE backups SET status = 'succeeded', location = ?, size = ?, checksum = ?, completed_at = ? WHERE id = ?",
        [f.location, f.size, f.checksum, Date.now(), id],
      )
    },

    async failed(id: string, error: string): Promise<void> {
      await db.run("UPDATE backups SET status = 'failed', error = ?, completed_at = ? WHERE id = ?", [
        error,
        Date.now(),
        id,
      ])
    },

    /**
     * This instance's unfinished jobs, which it can never finish now (it stopped or restarted);
     * another instance's are its own to settle. Rows from before instances were recorded count
     * as anyone's.
     */
    async failUnfinished(error: string): Promise<number> {
      return db.run(
        `UPDATE backups SET status = 'failed', error = ?, completed_at = ?
         WHERE status IN ('pending', 'running') AND (instance_id = ? OR instance_id IS NULL)`,
        [error, Date.now(), instance],
      )
    },

    /**
     * Whether a scheduled backup should wait: one of this instance is unfinished, or any started
     * within the last `windowMs` (an instance that died mid-backup holds the schedule back for one
     * period at most, until it restarts and settles its row).
     */
    async busy(windowMs: number): Promise<boolean> {
      return (await db.get(BUSY, [instance, Date.now() - windowMs])) !== undefined
    },

    async remove(id: string): Promise<void> {
      if ((await db.run('DELETE FROM backups WHERE id = ?', [id])) === 0)
        throw new NotFound(`backup ${id} not found`)
    },
  }
}

export type BackupStore = ReturnType<typeof backupStore>

import type { Db, Migration } from './db'

/** What the schedule keeps of one job: when it is due next, who runs it now, how its last run went. */
export interface JobRecord {
  name: string
  every_ms: number
  next_at: number
  lease_owner: string | null
  lease_until: number | null
  last_started_at: number | null
  last_duration_ms: number | null
  last_error: string | null
  last_instance: string | null
  last_success_at: number | null
  runs: number
}

/** How a run ended, as `finish` records it. */
export interface RunOutcome {
  startedAt: number
  durationMs: number
  error?: string
}

/**
 * Where ticks are claimed. The database one makes a tick one run across every instance sharing
 * the store; the memory one serves a single process (jobs that keep a cache of their own, and
 * unit tests). Every method is one statement: a conditional update is the lease, so the same SQL
 * holds on SQLite, PostgreSQL and MySQL (a concurrent claim waits for the row and re-checks it).
 */
export interface ScheduleStore {
  /**
   * Records the job (idempotent) and answers when it is due: a new job at `firstAt`; a known one
   * keeps its due time, brought forward to `now + everyMs` when its period shrank.
   */
  register(name: string, everyMs: number, firstAt: number, now: number): Promise<number>
  /**
   * Takes the tick due at `now` for `owner` until `leaseUntil` and moves the next one to `nextAt`.
   * True for exactly one claimant; false while the tick is not due or another holds the lease.
   */
  claim(name: string, owner: string, now: number, leaseUntil: number, nextAt: number): Promise<boolean>
  /** Extends a held lease; false when `owner` no longer holds it. */
  renew(name: string, owner: string, leaseUntil: number): Promise<boolean>
  /** Records a run and gives the lease back. */
  finish(name: string, owner: string, outcome: RunOutcome): Promise<void>
  /** When the job is due next (undefined for an unknown job). */
  nextAt(name: string): Promise<number | undefined>
  list(): Promise<JobRecord[]>
}

/** The schedule's table, in the ledger under `core.schedule` (its own numbering beside core's). */
export const scheduleMigrations: Migration[] = [
  {
    id: 1,
    name: 'schedule',
    sql: `CREATE TABLE liveops_schedule (
  name TEXT PRIMARY KEY,
  every_ms BIGINT NOT NULL,
  next_at BIGINT NOT NULL,
  lease_owner TEXT,
  lease_until BIGINT,
  last_started_at BIGINT,
  last_duration_ms BIGINT,
  last_error TEXT,
  last_instance TEXT,
  last_success_at BIGINT,
  runs BIGINT NOT NULL DEFAULT 0
)`,
  },
]

export function databaseScheduleStore(db: Db): ScheduleStore {
  return {
    async register(name, everyMs, firstAt, now) {
      await db.run(
        `INSERT INTO liveops_schedule (name, every_ms, next_at) VALUES (?, ?, ?)
         ON CONFLICT (name) DO UPDATE SET every_ms = excluded.every_ms,
           next_at = CASE WHEN liveops_schedule.next_at > ? THEN ? ELSE liveops_schedule.next_at END`,
        [name, everyMs, firstAt, now + everyMs, now + everyMs],
      )
      return (await this.nextAt(name)) ?? firstAt
    },
    async claim(name, owner, now, leaseUntil, nextAt) {
      const n = await db.run(
        `UPDATE liveops_schedule SET lease_owner = ?, lease_until = ?, next_at = ?
         WHERE name = ? AND next_at <= ? AND (lease_until IS NULL OR lease_until < ?)`,
        [owner, leaseUntil, nextAt, name, now, now],
      )
      return n === 1
    },
    async renew(name, owner, leaseUntil) {
      return (
        (await db.run('UPDATE liveops_schedule SET lease_until = ? WHERE name = ? AND lease_owner = ?', [
          leaseUntil,
          name,
          owner,
        ])) === 1
      )
    },
    async finish(name, owner, o) {
      await db.run(
        `UPDATE liveops_schedule SET lease_owner = NULL, lease_until = NULL, last_started_at = ?,
           last_duration_ms = ?, last_error = ?, last_instance = ?, runs = runs + 1,
           last_success_at = CASE WHEN CAST(? AS TEXT) IS NULL THEN ? ELSE last_success_at END
         WHERE name = ? AND lease_owner = ?`,
        [
          o.startedAt,
          Math.round(o.durationMs),
          o.error ?? null,
          owner,
          o.error ?? null,
          o.startedAt + Math.round(o.durationMs),
          name,
          owner,
        ],
      )
    },
    async nextAt(name) {
      const r = await db.get<{ next_at: number }>('SELECT next_at FROM liveops_schedule WHERE name = ?', [
        name,
      ])
      return r ? Number(r.next_at) : undefined
    },
    async list() {
      return db.all<JobRecord>('SELECT * FROM liveops_schedule ORDER BY name')
    },
  }
}

/** The same contract in this process alone. */
export function memoryScheduleStore(): ScheduleStore {
  const jobs = new Map<string, JobRecord>()
  return {
    async register(name, everyMs, firstAt, now) {
      const j = jobs.get(name)
      if (!j) {
        jobs.set(name, {
          name,
          every_ms: everyMs,
          next_at: firstAt,
          lease_owner: null,
          lease_until: null,
          last_started_at: null,
          last_duration_ms: null,
          last_error: null,
          last_instance: null,
          last_success_at: null,
          runs: 0,
        })
        return firstAt
      }
      j.every_ms = everyMs
      j.next_at = Math.min(j.next_at, now + everyMs)
      return j.next_at
    },
    async claim(name, owner, now, leaseUntil, nextAt) {
      const j = jobs.get(name)
      if (!j || j.next_at > now || (j.lease_until !== null && j.lease_until >= now)) return false
      Object.assign(j, { lease_owner: owner, lease_until: leaseUntil, next_at: nextAt })
      return true
    },
    async renew(name, owner, leaseUntil) {
      const j = jobs.get(name)
      if (j?.lease_owner !== owner) return false
      j.lease_until = leaseUntil
      return true
    },
    async finish(name, owner, o) {
      const j = jobs.get(name)
      if (j?.lease_owner !== owner) return
      Object.assign(j, {
        lease_owner: null,
        lease_until: null,
        last_started_at: o.startedAt,
        last_duration_ms: Math.round(o.durationMs),
        last_error: o.error ?? null,
        last_instance: owner,
        last_success_at: o.error === undefined ? o.startedAt + Math.round(o.durationMs) : j.last_success_at,
        runs: j.runs + 1,
      })
    },
    async nextAt(name) {
      return jobs.get(name)?.next_at
    },
    async list() {
      return [...jobs.values()].sort((a, b) => a.name.localeCompare(b.name))
    },
  }
}

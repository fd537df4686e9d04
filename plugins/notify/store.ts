import { type Db, type Param, fromJson, iso } from '../../core/db'
import { NotFound } from '../../core/http'

/** A delivery as written at acceptance and read back by a claim. */
export interface DeliveryRow {
  id: string
  notification_id: string
  channel: string
  provider_type: string
  type: string
  level: string
  targets: string
  recipients: string
  title: string
  body: string
  raw: string
  attempts: number
  created_at: number
}

export interface NotificationRow {
  id: string
  type: string
  level: string
  title: string
  template: string | null
  idempotency_key: string | null
  channels: string
  created_at: number
}

export type Outcome =
  | { id: string; kind: 'success'; attempt: number; worker: string; startedAt: number; durationMs: number; createdAt: number }
  | { id: string; kind: 'retry' | 'failed'; attempt: number; worker: string; startedAt: number; durationMs: number; createdAt: number; error: string; retryable: boolean; nextAt?: number }

/**
 * Writes from many concurrent callers coalesce into one transaction (group commit): each caller
 * waits for the commit that holds its rows, so an answer still follows durability, but the store
 * sees a few large transactions instead of thousands of small ones.
 */
export class GroupCommit<T> {
  private buf: { item: T; done: (e?: unknown) => void }[] = []
  private running = false

  constructor(
    private flush: (items: T[]) => Promise<void>,
    private max = 500,
  ) {}

  add(item: T): Promise<void> {
    return new Promise((resolve, reject) => {
      this.buf.push({ item, done: (e) => (e ? reject(e) : resolve()) })
      if (!this.running) this.kick()
    })
  }

  private kick() {
    this.running = true
    // setImmediate lets every request parsed in this tick join the same transaction.
    setImmediate(async () => {
      while (this.buf.length) {
        const batch = this.buf.splice(0, this.max)
        try {
          await this.flush(batch.map((b) => b.item))
          for (const b of batch) b.done()
        } catch (e) {
          for (const b of batch) b.done(e)
        }
      }
      this.running = false
    })
  }
}

const NOTIF_COLS = ['id', 'type', 'level', 'title', 'template', 'idempotency_key', 'channels', 'created_at'] as const
const DELIV_COLS = ['id', 'notification_id', 'channel', 'provider_type', 'type', 'level', 'status', 'targets', 'recipients', 'title', 'body', 'raw', 'attempts', 'next_at', 'created_at'] as const
const ATTEMPT_COLS = ['id', 'delivery_id', 'attempt', 'worker', 'started_at', 'duration_ms', 'ok', 'retryable', 'error'] as const

function insertMany(db: Db, table: string, cols: readonly string[], rows: Param[][], chunk = 100): Promise<unknown> {
  const jobs: Promise<number>[] = []
  for (let i = 0; i < rows.length; i += chunk) {
    const part = rows.slice(i, i + chunk)
    const one = `(${cols.map(() => '?').join(', ')})`
    jobs.push(db.run(`INSERT INTO ${table} (${cols.join(', ')}) VALUES ${part.map(() => one).join(', ')}`, part.flat()))
  }
  // Issued together: postgres.js pipelines them on the transaction's connection.
  return Promise.all(jobs)
}

const CLAIM_COLS = 'id, notification_id, channel, provider_type, type, level, targets, recipients, title, body, raw, attempts, created_at'

export function queueStore(db: Db, instanceId: string) {
  const accept = new GroupCommit<{ notification: NotificationRow; deliveries: DeliveryRow[] }>(async (items) => {
    const now = Date.now()
    await db.tx(async (tx) => {
      await insertMany(tx, 'notify_notifications', NOTIF_COLS, items.map(({ notification: n }) => NOTIF_COLS.map((c) => n[c])))
      const rows = items.flatMap((i) => i.deliveries)
      await insertMany(
        tx,
        'notify_deliveries',
        DELIV_COLS,
        rows.map((d) => DELIV_COLS.map((c) => (c === 'status' ? 'pending' : c === 'next_at' ? now : c === 'attempts' ? 0 : d[c]))),
      )
    })
  })

  const finish = new GroupCommit<Outcome>(async (items) => {
    const now = Date.now()
    await db.tx(async (tx) => {
      const jobs = items.map((o) => {
        if (o.kind === 'success')
          return tx.run(
            `UPDATE notify_deliveries SET status = 'success', finished_at = ?, latency_ms = ?, last_error = NULL, claimed_by = NULL, lease_until = NULL
             WHERE id = ? AND claimed_by = ? AND status = 'pending'`,
            [now, now - o.createdAt, o.id, instanceId],
          )
        if (o.kind === 'retry')
          return tx.run(
            'UPDATE notify_deliveries SET next_at = ?, last_error = ?, claimed_by = NULL, lease_until = NULL WHERE id = ? AND claimed_by = ? AND status = \'pending\'',
            [o.nextAt ?? now, o.error, o.id, instanceId],
          )
        return tx.run(
          `UPDATE notify_deliveries SET status = 'failed', finished_at = ?, latency_ms = ?, last_error = ?, claimed_by = NULL, lease_until = NULL
           WHERE id = ? AND claimed_by = ? AND status = 'pending'`,
          [now, now - o.createdAt, o.error, o.id, instanceId],
        )
      })
      jobs.push(
        insertMany(
          tx,
          'notify_attempts',
          ATTEMPT_COLS,
          items.map((o) => [
            Bun.randomUUIDv7(),
            o.id,
            o.attempt,
            o.worker,
            o.startedAt,
            Math.round(o.durationMs),
            o.kind === 'success' ? 1 : 0,
            o.kind !== 'success' && o.retryable ? 1 : 0,
            o.kind === 'success' ? null : o.error,
          ]),
        ) as Promise<number>,
      )
      await Promise.all(jobs)
    })
  })

  return {
    accept: (notification: NotificationRow, deliveries: DeliveryRow[]) => accept.add({ notification, deliveries }),
    finish: (o: Outcome) => finish.add(o),

    /**
     * Claims due deliveries of one channel for this instance. On PostgreSQL `FOR UPDATE SKIP
     * LOCKED` lets instances sharing the database claim disjoint rows without waiting on each
     * other; on SQLite the single serialized writer makes the statement atomic already.
     */
    async claim(channel: string, limit: number, leaseMs: number): Promise<DeliveryRow[]> {
      const now = Date.now()
      const lock = db.dialect === 'postgres' ? ' FOR UPDATE SKIP LOCKED' : ''
      return db.all<DeliveryRow>(
        `UPDATE notify_deliveries SET claimed_by = ?, lease_until = ?, attempts = attempts + 1
         WHERE id IN (SELECT id FROM notify_deliveries WHERE status = 'pending' AND channel = ? AND next_at <= ?
           AND (lease_until IS NULL OR lease_until < ?) ORDER BY next_at LIMIT ?${lock})
         RETURNING ${CLAIM_COLS}`,
        [instanceId, now + leaseMs, channel, now, now, limit],
      )
    },

    /** Gives back claims (a remote worker went away; this instance restarted) for immediate re-delivery. */
    async release(ids?: string[]): Promise<void> {
      if (ids && !ids.length) return
      if (!ids) {
        await db.run("UPDATE notify_deliveries SET claimed_by = NULL, lease_until = NULL WHERE claimed_by = ? AND status = 'pending'", [instanceId])
        return
      }
      await db.run(
        `UPDATE notify_deliveries SET claimed_by = NULL, lease_until = NULL, attempts = attempts - 1
         WHERE claimed_by = ? AND status = 'pending' AND id IN (${ids.map(() => '?').join(', ')})`,
        [instanceId, ...ids],
      )
    },

    /** Channels that have due work, so the dispatcher only claims where something waits. */
    async dueChannels(): Promise<string[]> {
      const now = Date.now()
      const rows = await db.all<{ channel: string }>(
        "SELECT DISTINCT channel FROM notify_deliveries WHERE status = 'pending' AND next_at <= ? AND (lease_until IS NULL OR lease_until < ?)",
        [now, now],
      )
      return rows.map((r) => r.channel)
    },

    async size(): Promise<number> {
      const r = await db.get<{ n: number }>("SELECT COUNT(*) AS n FROM notify_deliveries WHERE status = 'pending'")
      return Number(r?.n ?? 0)
    },
  }
}
export type QueueStore = ReturnType<typeof queueStore>

type LogRow = DeliveryRow & { status: string; next_at: number; last_error: string | null; finished_at: number | null; latency_ms: number | null }

const toLog = (r: LogRow) => ({
  id: r.id,
  notification_id: r.notification_id,
  provider: r.channel,
  provider_type: r.provider_type,
  type: r.type,
  level: r.level,
  status: r.status,
  targets: fromJson<string[]>(r.targets, []),
  recipients: fromJson<string[]>(r.recipients, []),
  title: r.title,
  attempt_count: Number(r.attempts),
  error: r.last_error ?? undefined,
  created_at: iso(r.created_at)!,
  finished_at: iso(r.finished_at),
  next_attempt_at: r.status === 'pending' ? iso(r.next_at) : undefined,
  latency_ms: r.latency_ms ?? undefined,
})

const LOG_COLS = `${CLAIM_COLS}, status, next_at, last_error, finished_at, latency_ms`

export interface LogFilter {
  offset?: number
  limit?: number
  status?: string
  provider?: string
  level?: string
  since?: string
  until?: string
}

function where(f: LogFilter): { sql: string; params: Param[] } {
  const parts: string[] = []
  const params: Param[] = []
  if (f.status) parts.push('status = ?'), params.push(f.status)
  if (f.provider) parts.push('(channel = ? OR provider_type = ?)'), params.push(f.provider, f.provider)
  if (f.level) parts.push('level = ?'), params.push(f.level)
  if (f.since) parts.push('created_at >= ?'), params.push(Date.parse(f.since))
  if (f.until) parts.push('created_at <= ?'), params.push(Date.parse(f.until))
  return { sql: parts.length ? `WHERE ${parts.join(' AND ')}` : '', params }
}

const percentile = (sorted: number[], p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] : 0)

/** Delivery logs: the deliveries table read newest first, with their attempts. */
export function logStore(db: Db) {
  return {
    async list(f: LogFilter) {
      const offset = f.offset ?? 0
      const limit = f.limit ?? 50
      const w = where(f)
      const [rows, total] = await Promise.all([
        db.all<LogRow>(`SELECT ${LOG_COLS} FROM notify_deliveries ${w.sql} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`, [...w.params, limit, offset]),
        db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM notify_deliveries ${w.sql}`, w.params),
      ])
      return { total: Number(total?.n ?? 0), offset, limit, logs: rows.map(toLog) }
    },

    async get(id: string) {
      const row = await db.get<LogRow>(`SELECT ${LOG_COLS} FROM notify_deliveries WHERE id = ?`, [id])
      if (!row) throw new NotFound(`delivery log '${id}' not found`)
      const attempts = await db.all<{ attempt: number; worker: string; started_at: number; duration_ms: number; ok: number; retryable: number; error: string | null }>(
        'SELECT attempt, worker, started_at, duration_ms, ok, retryable, error FROM notify_attempts WHERE delivery_id = ? ORDER BY attempt, started_at',
        [id],
      )
      return {
        ...toLog(row),
        body: row.body,
        raw: fromJson<Record<string, unknown>>(row.raw, {}),
        attempts: attempts.map((a) => ({
          attempt: Number(a.attempt),
          worker: a.worker,
          started_at: iso(a.started_at)!,
          duration_ms: Number(a.duration_ms),
          ok: !!a.ok,
          retryable: !!a.retryable,
          error: a.error ?? undefined,
        })),
      }
    },

    /** Counts by status, provider and level, the success rate of finished deliveries, and latency percentiles of the newest 10,000 successes. */
    async stats(f: Pick<LogFilter, 'since' | 'until'>) {
      const w = where(f)
      const group = (col: string) => db.all<{ k: string; status: string; n: number }>(`SELECT ${col} AS k, status, COUNT(*) AS n FROM notify_deliveries ${w.sql} GROUP BY ${col}, status`, w.params)
      const [byProvider, byLevel, lat] = await Promise.all([
        group('channel'),
        group('level'),
        db.all<{ latency_ms: number }>(
          `SELECT latency_ms FROM notify_deliveries ${w.sql ? `${w.sql} AND` : 'WHERE'} status = 'success' AND latency_ms IS NOT NULL ORDER BY created_at DESC LIMIT 10000`,
          w.params,
        ),
      ])
      const byStatus: Record<string, number> = { success: 0, failed: 0, pending: 0, shadow: 0 }
      const nest = (rows: { k: string; status: string; n: number }[]) => {
        const out: Record<string, Record<string, number>> = {}
        for (const r of rows) {
          out[r.k] ??= { total: 0 }
          out[r.k][r.status] = Number(r.n)
          out[r.k].total += Number(r.n)
        }
        return out
      }
      for (const r of byProvider) byStatus[r.status] = (byStatus[r.status] ?? 0) + Number(r.n)
      const total = Object.values(byStatus).reduce((a, b) => a + b, 0)
      const finished = byStatus.success + byStatus.failed
      const sorted = lat.map((r) => Number(r.latency_ms)).sort((a, b) => a - b)
      return {
        total,
        by_status: byStatus,
        by_provider: nest(byProvider),
        by_level: nest(byLevel),
        success_rate: finished ? byStatus.success / finished : null,
        latency_ms: { p50: percentile(sorted, 50), p95: percentile(sorted, 95), samples: sorted.length },
      }
    },
  }
}

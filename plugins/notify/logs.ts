import { type Db, type Param, fromJson, iso } from '../../core/db'
import { NotFound } from '../../core/http'
import { maskNamed, setOnly } from '../../core/log'
import { CLAIM_COLS, type DeliveryRow } from './store'

type LogRow = DeliveryRow & {
  status: string
  next_at: number
  last_error: string | null
  finished_at: number | null
  latency_ms: number | null
}

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
  const add = (sql: string, ...values: Param[]) => {
    parts.push(sql)
    params.push(...values)
  }
  if (f.status) add('status = ?', f.status)
  if (f.provider) add('(channel = ? OR provider_type = ?)', f.provider, f.provider)
  if (f.level) add('level = ?', f.level)
  if (f.since) add('created_at >= ?', Date.parse(f.since))
  if (f.until) add('created_at <= ?', Date.parse(f.until))
  return { sql: parts.length ? `WHERE ${parts.join(' AND ')}` : '', params }
}

const percentile = (sorted: number[], p: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] : 0

/**
 * Delivery logs: the deliveries table read newest first, with their attempts. A delivery's `raw`
 * fields (the request's params and data, which providers receive as sent) are read back with the
 * values under `sensitive` names (`log.sensitive_fields`: password, token, ...) masked, as the log
 * and the audit show them: every role may read the logs.
 */
export function logStore(db: Db, sensitive: readonly string[] = []) {
  const masked = new Set(sensitive.map((f) => f.toLowerCase()))
  return {
    async list(f: LogFilter) {
      const offset = f.offset ?? 0
      const limit = f.limit ?? 50
      const w = where(f)
      const [rows, total] = await Promise.all([
        db.all<LogRow>(
          `SELECT ${LOG_COLS} FROM notify_deliveries ${w.sql} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`,
          [...w.params, limit, offset],
        ),
        db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM notify_deliveries ${w.sql}`, w.params),
      ])
      return { total: Number(total?.n ?? 0), offset, limit, logs: rows.map(toLog) }
    },

    async get(id: string) {
      const row = await db.get<LogRow>(`SELECT ${LOG_COLS} FROM notify_deliveries WHERE id = ?`, [id])
      if (!row) throw new NotFound(`delivery log '${id}' not found`)
      const attempts = await db.all<{
        attempt: number
        worker: string
        started_at: number
        duration_ms: number
        ok: number
        retryable: number
        error: string | null
      }>(
        'SELECT attempt, worker, started_at, duration_ms, ok, retryable, error FROM notify_attempts WHERE delivery_id = ? ORDER BY attempt, started_at',
        [id],
      )
      return {
        ...toLog(row),
        body: row.body,
        raw: maskNamed(fromJson<Record<string, unknown>>(row.raw, {}), masked, setOnly),
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
      const group = (col: string) =>
        db.all<{ k: string; status: string; n: number }>(
          `SELECT ${col} AS k, status, COUNT(*) AS n FROM notify_deliveries ${w.sql} GROUP BY ${col}, status`,
          w.params,
        )
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

/** Rows a purge deletes per statement: the SQLite writer is never held for long. */
const PURGE_SLICE = 500

/**
 * `retention_days`: deletes the finished deliveries created before `before` with their attempts,
 * and the notifications of that age. Pending deliveries stay whatever their age (a disabled
 * channel's queue waits for it). Answers how many deliveries and notifications went.
 */
export async function purgeLogs(
  db: Db,
  before: number,
): Promise<{ deliveries: number; notifications: number }> {
  let deliveries = 0
  let notifications = 0
  for (;;) {
    const ids = (
      await db.all<{ id: string }>(
        `SELECT id FROM notify_deliveries WHERE created_at < ? AND status <> 'pending' LIMIT ${PURGE_SLICE}`,
        [before],
      )
    ).map((r) => r.id)
    if (!ids.length) break
    const marks = ids.map(() => '?').join(', ')
    await db.tx(async (tx) => {
      await tx.run(`DELETE FROM notify_attempts WHERE delivery_id IN (${marks})`, ids)
      deliveries += await tx.run(`DELETE FROM notify_deliveries WHERE id IN (${marks})`, ids)
    })
    if (ids.length < PURGE_SLICE) break
  }
  for (;;) {
    const n = await db.run(
      `DELETE FROM notify_notifications WHERE id IN (SELECT id FROM notify_notifications WHERE created_at < ? LIMIT ${PURGE_SLICE})`,
      [before],
    )
    notifications += n
    if (n < PURGE_SLICE) break
  }
  return { deliveries, notifications }
}

import type { Db, Param } from '../../core/db'
import type { Invocation } from './schema'
import { DAY, HOUR, MINUTE, floorTo } from './sql'
import type { ExperimentCounts, ScannedEvent } from './types'
import { histValue } from './writer'

const date = (ms: number) => new Date(ms).toISOString().slice(0, 10)
const n = (v: unknown) => Number(v ?? 0)

/** `game_id = ? [AND env = ?]`: built, not `? IS NULL`, because PostgreSQL cannot type a bare NULL parameter. */
function scope(gameId: string, env: string | undefined): { where: string; params: Param[] } {
  return env === undefined
    ? { where: 'game_id = ?', params: [gameId] }
    : { where: 'game_id = ? AND env = ?', params: [gameId, env] }
}

/** Reads of the warehouse endpoints; every one reads rollups, never raw events, except the invocation list. */
export function warehouseStore(db: Db) {
  return {
    async dau(q: { gameId: string; env?: string; days: number }, now = Date.now()) {
      const from = floorTo(now, DAY) - (q.days - 1) * DAY
      const { where, params } = scope(q.gameId, q.env)
      // The day counters, plus the logged user-days not yet merged that are new (migration
      // 003): one statement, so one snapshot, whether or not a merge commits meanwhile.
      const rows = await db.all<{ env: string; day: number; dau: number; new_users: number }>(
        `SELECT env, day, SUM(dau) AS dau, SUM(new_users) AS new_users FROM (
           SELECT env, day, dau, new_users FROM ingest_daily WHERE ${where} AND day >= ?
           UNION ALL
           SELECT env, day, COUNT(DISTINCT user_id), 0 FROM ingest_user_day_log l
            WHERE ${where} AND day >= ? AND NOT EXISTS (SELECT 1 FROM ingest_user_day u
              WHERE u.game_id = l.game_id AND u.env = l.env AND u.day = l.day AND u.user_id = l.user_id)
            GROUP BY env, day
         ) t GROUP BY env, day`,
        [...params, from, ...params, from],
      )
      const envs = q.env !== undefined ? [q.env] : [...new Set(rows.map((r) => r.env))].sort()
      const byKey = new Map(rows.map((r) => [`${r.env}|${n(r.day)}`, r]))
      const points = []
      for (let day = from; day <= floorTo(now, DAY); day += DAY)
        for (const env of envs) {
          const r = byKey.get(`${env}|${day}`)
          points.push({ date: date(day), gameId: q.gameId, env, dau: n(r?.dau), newUsers: n(r?.new_users) })
        }
      return { points }
    },

    async revenue(q: { gameId: string; env?: string; days: number }, now = Date.now()) {
      const from = floorTo(now, DAY) - (q.days - 1) * DAY
      const { where, params } = scope(q.gameId, q.env)
      const rows = await db.all<{ day: number; r: number; f: number; x: number }>(
        `SELECT day, SUM(revenue_cents) AS r, SUM(refunds_cents) AS f, SUM(failed) AS x FROM ingest_daily WHERE ${where} AND day >= ? GROUP BY day`,
        [...params, from],
      )
      const byDay = new Map(rows.map((r) => [n(r.day), r]))
      const points = []
      for (let day = from; day <= floorTo(now, DAY); day += DAY) {
        const r = byDay.get(day)
        points.push({ date: date(day), revenueCents: n(r?.r), refundsCents: n(r?.f), failed: n(r?.x) })
      }
      return { points }
    },

    /** Per-minute estimates of each environment, summed (spec: "merged by sum"). */
    async online(q: { gameId: string; env?: string; minutes: number }, now = Date.now()) {
      const from = floorTo(now, MINUTE) - (q.minutes - 1) * MINUTE
      const { where, params } = scope(q.gameId, q.env)
      const rows = await db.all<{ minute: number; online: number }>(
        `SELECT minute, SUM(online) AS online FROM ingest_online WHERE ${where} AND minute >= ? GROUP BY minute`,
        [...params, from],
      )
      const byMinute = new Map(rows.map((r) => [n(r.minute), n(r.online)]))
      const points = []
      for (let m = from; m <= floorTo(now, MINUTE); m += MINUTE)
        points.push({ minute: new Date(m).toISOString(), online: byMinute.get(m) ?? 0 })
      return { points }
    },

    async summary(q: { gameId: string; env?: string; hours: number }, now = Date.now()) {
      const from = floorTo(now, HOUR) - (q.hours - 1) * HOUR
      const { where, params } = scope(q.gameId, q.env)
      const fns = await db.all<{
        function_id: string
        total: number
        failed: number
        ds: number
        dn: number
      }>(
        `SELECT function_id, SUM(total) AS total, SUM(failed) AS failed, SUM(duration_sum) AS ds, SUM(duration_n) AS dn
         FROM ingest_invocation_hour WHERE ${where} AND hour >= ? GROUP BY function_id`,
        [...params, from],
      )
      const hist = await db.all<{ bucket: number; n: number }>(
        `SELECT bucket, SUM(n) AS n FROM ingest_invocation_hist WHERE ${where} AND hour >= ? GROUP BY bucket ORDER BY bucket`,
        [...params, from],
      )
      const total = fns.reduce((a, r) => a + n(r.total), 0)
      const failed = fns.reduce((a, r) => a + n(r.failed), 0)
      const ds = fns.reduce((a, r) => a + n(r.ds), 0)
      const dn = fns.reduce((a, r) => a + n(r.dn), 0)
      const counted = hist.reduce((a, r) => a + n(r.n), 0)
      let p95 = 0
      let seen = 0
      for (const r of hist) {
        seen += n(r.n)
        if (seen >= Math.ceil(counted * 0.95)) {
          p95 = Math.round(histValue(n(r.bucket)) * 100) / 100
          break
        }
      }
      const round = (x: number) => Math.round(x * 100) / 100
      return {
        total,
        failed,
        successRate: total ? (total - failed) / total : 1,
        avgDurationMs: dn ? round(ds / dn) : 0,
        p95DurationMs: p95,
        topFunctions: fns
          .map((r) => ({
            functionId: r.function_id,
            total: n(r.total),
            failed: n(r.failed),
            avgDurationMs: n(r.dn) ? round(n(r.ds) / n(r.dn)) : 0,
          }))
          .sort((a, b) => b.total - a.total || a.functionId.localeCompare(b.functionId))
          .slice(0, 10),
      }
    },

    async trend(
      q: { gameId: string; env?: string; interval: 'hour' | 'day'; limit?: number },
      now = Date.now(),
    ) {
      const unit = q.interval === 'day' ? DAY : HOUR
      const count = q.limit ?? (q.interval === 'day' ? 14 : 24)
      const from = floorTo(now, unit) - (count - 1) * unit
      const { where, params } = scope(q.gameId, q.env)
      const rows = await db.all<{ hour: number; total: number; failed: number }>(
        `SELECT hour, SUM(total) AS total, SUM(failed) AS failed FROM ingest_invocation_hour WHERE ${where} AND hour >= ? GROUP BY hour`,
        [...params, from],
      )
      const byBucket = new Map<number, { total: number; failed: number }>()
      for (const r of rows) {
        const b = floorTo(n(r.hour), unit)
        const x = byBucket.get(b) ?? { total: 0, failed: 0 }
        x.total += n(r.total)
        x.failed += n(r.failed)
        byBucket.set(b, x)
      }
      const points = []
      for (let b = from; b <= floorTo(now, unit); b += unit)
        points.push({ bucket: new Date(b).toISOString(), ...(byBucket.get(b) ?? { total: 0, failed: 0 }) })
      return { points }
    },

    async invocations(q: {
      gameId: string
      env?: string
      functionId?: string
      outcome?: string
      page: number
      pageSize: number
    }) {
      const s = scope(q.gameId, q.env)
      let where = s.where
      const params = [...s.params]
      if (q.functionId !== undefined) {
        where += ' AND function_id = ?'
        params.push(q.functionId)
      }
      if (q.outcome !== undefined) {
        where += ' AND outcome = ?'
        params.push(q.outcome)
      }
      const [count, rows] = await Promise.all([
        db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM ingest_invocations WHERE ${where}`, params),
        db.all<{
          ts: number
          function_id: string
          actor: string | null
          outcome: string
          duration_ms: number | null
          trace_id: string | null
        }>(
          `SELECT ts, function_id, actor, outcome, duration_ms, trace_id FROM ingest_invocations WHERE ${where} ORDER BY ts DESC, id DESC LIMIT ? OFFSET ?`,
          [...params, q.pageSize, q.page * q.pageSize],
        ),
      ])
      const items: Invocation[] = rows.map((r) => ({
        timestamp: new Date(n(r.ts)).toISOString(),
        functionId: r.function_id,
        actor: r.actor,
        outcome: r.outcome,
        durationMs: r.duration_ms === null ? null : n(r.duration_ms),
        traceId: r.trace_id,
      }))
      return { items, total: n(count?.n), page: q.page, pageSize: q.pageSize }
    },
  }
}

/** See `EventsService.scan`. */
export async function scanEvents(
  db: Db,
  q: {
    gameId: string
    env?: string
    events?: string[]
    from: number
    to: number
    afterId?: number
    limit: number
  },
): Promise<ScannedEvent[]> {
  const where = ['game_id = ?', 'id > ?', 'ts >= ?', 'ts <= ?']
  const params: Param[] = [q.gameId, q.afterId ?? -1, q.from, q.to]
  if (q.env !== undefined) {
    where.push('env = ?')
    params.push(q.env)
  }
  if (q.events?.length) {
    where.push(`event IN (${q.events.map(() => '?').join(', ')})`)
    params.push(...q.events)
  }
  const rows = await db.all<{
    id: number
    game_id: string
    env: string
    event: string
    ts: number
    user_id: string | null
    amount_cents: number | null
    props: string
  }>(
    `SELECT id, game_id, env, event, ts, user_id, amount_cents, props FROM ingest_events WHERE ${where.join(' AND ')} ORDER BY id LIMIT ?`,
    [...params, Math.max(1, Math.min(10_000, Math.floor(q.limit)))],
  )
  return rows.map((r) => {
    let props: Record<string, unknown> = {}
    try {
      props = JSON.parse(r.props)
    } catch {}
    return {
      id: n(r.id),
      gameId: r.game_id,
      env: r.env,
      event: r.event,
      ts: n(r.ts),
      userId: r.user_id,
      amountCents: r.amount_cents === null ? null : n(r.amount_cents),
      props,
    }
  })
}

/** Experiment counts from the exposure and conversion rollups. */
export async function experimentCounts(
  db: Db,
  q: { gameId: string; environment: string; experimentId: string; metrics: string[] },
): Promise<ExperimentCounts> {
  const base = [q.gameId, q.environment, q.experimentId]
  const exposures = await db.all<{ variant: string; n: number }>(
    'SELECT variant, COUNT(*) AS n FROM ingest_exposures WHERE game_id = ? AND env = ? AND experiment_id = ? GROUP BY variant',
    base,
  )
  const out: ExperimentCounts = { variants: {} }
  for (const r of exposures)
    out.variants[r.variant] = {
      exposures: n(r.n),
      conversions: Object.fromEntries(q.metrics.map((m) => [m, 0])),
    }
  if (!q.metrics.length || !exposures.length) return out
  const conv = await db.all<{ variant: string; event: string; n: number }>(
    `SELECT x.variant, u.event, COUNT(*) AS n FROM ingest_exposures x
     JOIN ingest_user_events u ON u.game_id = x.game_id AND u.env = x.env AND u.user_id = x.user_id
     WHERE x.game_id = ? AND x.env = ? AND x.experiment_id = ? AND u.event IN (${q.metrics.map(() => '?').join(', ')}) AND u.last_ts >= x.ts
     GROUP BY x.variant, u.event`,
    [...base, ...q.metrics],
  )
  for (const r of conv) {
    const v = out.variants[r.variant]
    if (v) v.conversions[r.event] = n(r.n)
  }
  return out
}

/**
 * Deletes what is older than each environment's retention: raw events, payments, invocations and
 * the per-user and per-minute detail. Daily and hourly counters stay. Deletes raw rows by receive time, in
 * slices so the SQLite writer is never held for long.
 */
export async function purge(
  db: Db,
  envs: Array<{ gameId: string; name: string; retentionDays: number }>,
  now = Date.now(),
): Promise<number> {
  let deleted = 0
  // Ids are receive time x 1024, so `id < cutoff x 1024` is a range walk on the primary key.
  const slice = async (table: string, g: string, e: string, cutoff: number) => {
    for (;;) {
      const n = await db.run(
        `DELETE FROM ${table} WHERE id IN (SELECT id FROM ${table} WHERE id < ? AND game_id = ? AND env = ? LIMIT 5000)`,
        [cutoff * 1024, g, e],
      )
      deleted += n
      if (n < 5000) break
    }
  }
  for (const env of envs) {
    const cutoff = now - env.retentionDays * DAY
    const g = env.gameId
    const e = env.name
    await slice('ingest_events', g, e, cutoff)
    await slice('ingest_invocations', g, e, cutoff)
    deleted += await db.run('DELETE FROM ingest_payments WHERE game_id = ? AND env = ? AND received_at < ?', [
      g,
      e,
      cutoff,
    ])
    // Logged user-days (migration 003) are left to their merge, which counts them; the next
    // purge takes them from ingest_user_day.
    deleted += await db.run('DELETE FROM ingest_user_day WHERE game_id = ? AND env = ? AND day < ?', [
      g,
      e,
      floorTo(cutoff, DAY),
    ])
    deleted += await db.run('DELETE FROM ingest_online WHERE game_id = ? AND env = ? AND minute < ?', [
      g,
      e,
      cutoff,
    ])
  }
  return deleted
}

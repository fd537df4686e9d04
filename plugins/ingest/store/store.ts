import type { Db, Param } from '../../../core/db'
import type { ScannedEvent } from '../types'
import { DAY } from './sql'

const n = (v: unknown) => Number(v ?? 0)

/** One stored invocation, as the invocation list answers it. */
export interface InvocationRow {
  timestamp: string
  functionId: string
  actor: string | null
  outcome: string
  durationMs: number | null
  traceId: string | null
}

export interface InvocationQuery {
  gameId: string
  env?: string
  functionId?: string
  outcome?: string
  page: number
  pageSize: number
}

/** Stored invocations, newest first, paged: the one list read over raw rows (spec 1, /invocations). */
export async function invocations(db: Db, q: InvocationQuery) {
  let where = q.env === undefined ? 'game_id = ?' : 'game_id = ? AND env = ?'
  const params: Param[] = q.env === undefined ? [q.gameId] : [q.gameId, q.env]
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
  const items: InvocationRow[] = rows.map((r) => ({
    timestamp: new Date(n(r.ts)).toISOString(),
    functionId: r.function_id,
    actor: r.actor,
    outcome: r.outcome,
    durationMs: r.duration_ms === null ? null : n(r.duration_ms),
    traceId: r.trace_id,
  }))
  return { items, total: n(count?.n), page: q.page, pageSize: q.pageSize }
}

/**
 * Deletes what is older than each environment's retention: raw events, payments, invocations,
 * and what each consumer of the log purges of its own detail (`onPurge`). Deletes raw rows by receive
 * time, in slices so the SQLite writer is never held for long.
 */
export async function purge(
  db: Db,
  envs: Array<{ gameId: string; name: string; retentionDays: number }>,
  now = Date.now(),
  purgers: ReadonlyArray<
    (db: Db, env: { gameId: string; env: string }, cutoff: number) => Promise<number>
  > = [],
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
    for (const p of purgers) deleted += await p(db, { gameId: g, env: e }, cutoff)
  }
  return deleted
}

/** The props of a light read's rows: one shared empty object (a light read walks many rows). */
const NO_PROPS: Record<string, unknown> = Object.freeze({})

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
    toId?: number
    userId?: string
    withProps?: boolean
    limit: number
  },
): Promise<ScannedEvent[]> {
  const where = ['game_id = ?', 'id > ?', 'ts >= ?', 'ts <= ?']
  const params: Param[] = [q.gameId, q.afterId ?? -1, q.from, q.to]
  if (q.toId !== undefined) {
    where.push('id <= ?')
    params.push(q.toId)
  }
  if (q.env !== undefined) {
    where.push('env = ?')
    params.push(q.env)
  }
  if (q.userId !== undefined) {
    where.push('user_id = ?')
    params.push(q.userId)
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
    session_id: string | null
    amount_cents: number | null
    props: string | null
  }>(
    // A light read (no props) leaves out what its readers (funnels, paths) do not use.
    `SELECT id, ${q.withProps === false ? "'' AS game_id, '' AS env" : 'game_id, env'}, event, ts, user_id,
       ${q.withProps === false ? 'NULL AS session_id, NULL AS amount_cents, NULL AS props' : 'session_id, amount_cents, props'}
     FROM ingest_events WHERE ${where.join(' AND ')} ORDER BY id LIMIT ?`,
    [...params, Math.max(1, Math.min(10_000, Math.floor(q.limit)))],
  )
  return rows.map((r) => {
    let props: Record<string, unknown> = NO_PROPS
    if (r.props !== null)
      try {
        props = JSON.parse(r.props)
      } catch {
        props = {}
      }
    return {
      id: n(r.id),
      gameId: q.withProps === false ? q.gameId : r.game_id,
      env: q.withProps === false && q.env !== undefined ? q.env : r.env,
      event: r.event,
      ts: n(r.ts),
      userId: r.user_id,
      sessionId: r.session_id,
      amountCents: r.amount_cents === null ? null : n(r.amount_cents),
      props,
    }
  })
}

/**
 * The dedup window's end: event ids received before `cutoff` (epoch ms) are forgotten, in slices
 * so the SQLite writer is never held for long (a scan of the table by receive time).
 */
export async function purgeEventIds(db: Db, cutoff: number): Promise<number> {
  let deleted = 0
  for (;;) {
    const n = await db.run(
      `DELETE FROM ingest_event_ids WHERE (stream, event_id) IN
       (SELECT stream, event_id FROM ingest_event_ids WHERE received_at < ? LIMIT 5000)`,
      [cutoff],
    )
    deleted += n
    if (n < 5000) return deleted
  }
}

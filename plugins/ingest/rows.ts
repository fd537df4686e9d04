import { type NormEvent, pick, str } from './signed/validate'

/**
 * Helpers for the code that turns a commit's events into rows: ingest's writer and the rollups
 * registered into it.
 *
 * Rows go out stream by stream, each key part compared as text: the order of the key joined
 * with \u0001, as the writer has always sorted. Concurrent commits (PostgreSQL) therefore lock
 * rows in one order and never deadlock; on SQLite sorted keys touch each B-tree page once.
 */
export const byText = (a: string | number, b: string | number) => {
  const x = String(a)
  const y = String(b)
  return x < y ? -1 : x > y ? 1 : 0
}

export function inOrder<K extends string | number>(m: Map<K, unknown>): K[] {
  const keys = [...m.keys()]
  if (keys.length > 1) {
    // Strings alone sort fastest without a comparator, by UTF-16 code unit as `<` compares.
    if (typeof keys[0] === 'string') keys.sort()
    else keys.sort(byText)
  }
  return keys
}

/** What a `function.invoke` event says of its call. */
export interface InvocationFacts {
  functionId: string
  outcome: 'success' | 'failure'
  actor: string | null
  traceId: string | null
}

export function invocationOf(e: NormEvent): InvocationFacts {
  // success or failure (spec 1, /invocations): an outcome that says anything but success
  // (error, timeout, failed) is a failure; none at all counts as the call succeeding.
  const said = str(pick(e.props, 'outcome'))
  return {
    functionId: str(pick(e.props, 'functionId')) ?? str(pick(e.props, 'function_id')) ?? 'unknown',
    outcome: said == null || said === 'success' ? 'success' : 'failure',
    actor: str(pick(e.props, 'actor')),
    traceId: str(pick(e.props, 'traceId')) ?? str(pick(e.props, 'trace_id')),
  }
}

/**
 * Groups a commit's events by game and environment (runs of one stream share the lookup), in
 * key order, calling `visit` for each stream with the indexes of its events.
 */
export function byStream(events: readonly NormEvent[]): Array<{ gameId: string; env: string; at: number[] }> {
  const streams = new Map<string, { gameId: string; env: string; at: number[] }>()
  let cur: { gameId: string; env: string; at: number[] } | undefined
  for (let i = 0; i < events.length; i++) {
    const e = events[i]
    if (cur === undefined || cur.gameId !== e.gameId || cur.env !== e.env) {
      const k = `${e.gameId}\u0001${e.env}`
      cur = streams.get(k)
      if (!cur) {
        cur = { gameId: e.gameId, env: e.env, at: [] }
        streams.set(k, cur)
      }
    }
    cur.at.push(i)
  }
  return [...streams.values()].sort((a, b) => byText(a.gameId, b.gameId) || byText(a.env, b.env))
}

/**
 * Key order for rows written in bulk: each key part compared as text, the order of the key
 * joined with \u0001. Writers sorting their keys this way touch each B-tree page once (SQLite)
 * and lock shared rows in one order (PostgreSQL).
 */
export const byText = (a: string | number, b: string | number) => {
  const x = String(a)
  const y = String(b)
  return x < y ? -1 : x > y ? 1 : 0
}

/** A map's keys in that order. */
export function inOrder<K extends string | number>(m: Map<K, unknown>): K[] {
  const keys = [...m.keys()]
  if (keys.length > 1) {
    // Strings alone sort fastest without a comparator, by UTF-16 code unit as `<` compares.
    if (typeof keys[0] === 'string') keys.sort()
    else keys.sort(byText)
  }
  return keys
}

/**
 * Rows grouped by game and environment (a stream), streams in key order, each with the indexes
 * of its rows; consecutive rows of one stream share the lookup.
 */
export function byStream(
  rows: readonly { gameId: string; env: string }[],
): Array<{ gameId: string; env: string; at: number[] }> {
  const streams = new Map<string, { gameId: string; env: string; at: number[] }>()
  let cur: { gameId: string; env: string; at: number[] } | undefined
  for (let i = 0; i < rows.length; i++) {
    const e = rows[i]
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

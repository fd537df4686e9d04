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

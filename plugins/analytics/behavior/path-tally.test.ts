import { afterEach, expect, test } from 'bun:test'
import { PathTally } from './path-tally'
import { cmpText, sortRun, walkSlice } from './timeline'

const slice = walkSlice.rows
afterEach(() => {
  walkSlice.rows = slice
})

/** A small seeded generator, so a failure can be replayed. */
function rng(seed: number) {
  let s = seed
  return () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0
    return s / 2 ** 32
  }
}

/** The top paths worked out the plain way: a string key per path, every path sorted. */
function reference(paths: number[][], top: number, names: string[]) {
  const counts = new Map<string, { path: string[]; count: number }>()
  for (const p of paths) {
    const steps = p.filter((c, i) => i === 0 || p[i - 1] !== c).slice(0, 5)
    const key = steps.join(',')
    const hit = counts.get(key) ?? { path: steps.map((c) => names[c]), count: 0 }
    hit.count++
    counts.set(key, hit)
  }
  return [...counts.values()]
    .sort((a, b) => b.count - a.count || cmpText(a.path.join('\u0001'), b.path.join('\u0001')))
    .slice(0, top)
}

// Names that begin one another and hold units below and around U+0001, where the order of the
// joined labels is not the order of the names one by one.
const names = ['a', 'ab', 'a\u0000', 'a\u0001', 'a\u0002b', 'b', 'ba', '', 'é', 'z']

test('counts and top paths are those of a string key per path, ties in the order of the joined names', async () => {
  const next = rng(7)
  const paths = Array.from({ length: 5_000 }, () =>
    Array.from({ length: 1 + Math.floor(next() * 8) }, () => Math.floor(next() * names.length)),
  )
  for (const rows of [1, 3, 16_384]) {
    walkSlice.rows = rows
    const t = new PathTally(5)
    for (const p of paths) t.count(Int32Array.from(p), 0, p.length)
    for (const top of [1, 10, 100]) expect(await t.top(top, names)).toEqual(reference(paths, top, names))
  }
})

test('every path of a count ties: the first in label order are kept (a heap, not a sort of all)', async () => {
  const t = new PathTally(3)
  const many = Array.from({ length: 3_000 }, (_, i) => `n${i}`)
  for (let i = many.length - 1; i >= 0; i--) t.count(Int32Array.of(i, (i + 1) % many.length), 0, 2)
  expect((await t.top(2, many)).map((p) => p.path)).toEqual([
    ['n0', 'n1'],
    ['n1', 'n2'],
  ])
})

test('a run sorted by time in place, equal times in their order, short runs and long', () => {
  for (const n of [5, 32, 33, 200]) {
    const next = rng(n)
    const ts = Float64Array.from({ length: n }, () => Math.floor(next() * 10))
    const code = Int32Array.from({ length: n }, (_, i) => i)
    const want = [...code].sort((x, y) => ts[x] - ts[y] || x - y)
    sortRun(ts, code, 0, n)
    expect([...code]).toEqual(want)
    expect([...ts]).toEqual([...ts].sort((x, y) => x - y))
  }
})

import { describe, expect, test } from 'bun:test'
import { rng } from '../../../test/outside/fuzz-gen'
import { type FunnelOrder, NextStep, attempt } from './funnel'

/** The attempt as it read every event of its window (the definition the indexed one must keep). */
function scanned(
  ts: Float64Array,
  code: Int32Array,
  i: number,
  end: number,
  S: number,
  window: number,
  order: FunnelOrder,
) {
  const t0 = ts[i]
  if (order === 'any') {
    if (!code[i]) return []
    let done = 0
    const times: number[] = []
    for (let j = i; j < end && ts[j] - t0 <= window && times.length < S; j++) {
      const open = code[j] & ~done
      if (!open) continue
      done |= open & -open
      times.push(ts[j])
    }
    return times
  }
  if (!(code[i] & 1)) return []
  const times = [t0]
  for (let j = i + 1; j < end && times.length < S && ts[j] - t0 <= window; j++) {
    if (code[j] & (1 << times.length)) times.push(ts[j])
    else if (order === 'strict') break
  }
  return times
}

describe('a funnel attempt found by index', () => {
  test('reaches the same steps at the same times as reading every event, on random lines of every order', () => {
    const random = rng(35).next
    let compared = 0
    for (let round = 0; round < 400; round++) {
      const S = 1 + Math.floor(random() * 5)
      const n = 1 + Math.floor(random() * 60)
      const ts = new Float64Array(n)
      const code = new Int32Array(n)
      // Two users in one buffer: the second's line is the one judged, as in the funnel.
      const lo = Math.floor(random() * 3)
      let t = 0
      for (let j = 0; j < n; j++) {
        t += Math.floor(random() * 4)
        ts[j] = t
        // Mostly one step, some events matching two steps (one event named by two steps), some none.
        const r = random()
        code[j] =
          r < 0.15
            ? 0
            : r < 0.3
              ? (1 << Math.floor(random() * S)) | (1 << Math.floor(random() * S))
              : 1 << Math.floor(random() * S)
      }
      const next = new NextStep(S)
      next.index(code, lo, n)
      const window = Math.floor(random() * 20)
      for (const order of ['ordered', 'strict', 'any'] as const)
        for (let i = lo; i < n; i++) {
          expect(attempt(ts, code, next, i, n, S, window, order)).toEqual(
            scanned(ts, code, i, n, S, window, order),
          )
          compared++
        }
    }
    expect(compared).toBeGreaterThan(10_000)
  })

  test('a user with many first steps and no second: each attempt reads a few times, not its whole window', () => {
    const n = 3_000
    const times = Float64Array.from({ length: n }, (_, j) => j)
    let reads = 0
    // Counts every time read: a scan of each window reads n * n / 2 of them.
    const ts = new Proxy(times, {
      get: (target, key) => {
        if (typeof key === 'string' && /^\d+$/.test(key)) reads++
        return Reflect.get(target, key)
      },
    }) as Float64Array
    const code = new Int32Array(n).fill(1)
    const next = new NextStep(2)
    next.index(code, 0, n)
    for (const order of ['ordered', 'any'] as const) {
      reads = 0
      let reached = 0
      for (let i = 0; i < n; i++)
        reached = Math.max(reached, attempt(ts, code, next, i, n, 2, n, order).length)
      expect([order, reached]).toEqual([order, 1])
      expect(reads).toBeLessThan(4 * n)
    }
  })
})

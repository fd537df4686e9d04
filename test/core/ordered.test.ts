import { describe, expect, test } from 'bun:test'
import { inPartOrder } from '../../core/ordered'

/** A part that emits its pages when told to, then ends (or fails) when told to. */
function part(pages: string[]) {
  let go!: () => void
  let fail!: (e: Error) => void
  const gate = new Promise<void>((resolve, reject) => {
    go = resolve
    fail = reject
  })
  return {
    run: async (emit: (p: string) => void) => {
      for (const p of pages) emit(p)
      await gate
    },
    go: () => go(),
    fail: (e: Error) => fail(e),
  }
}

describe('inPartOrder', () => {
  test('pages reach the caller in part order whatever order the parts finish in', async () => {
    const a = part(['a1', 'a2'])
    const b = part(['b1'])
    const c = part(['c1', 'c2'])
    const seen: string[] = []
    const done = inPartOrder([a.run, b.run, c.run], (p) => seen.push(p))
    // All three emitted at once: only the first part's pages are handed over yet.
    expect(seen).toEqual(['a1', 'a2'])
    c.go()
    b.go()
    await new Promise((r) => setImmediate(r))
    expect(seen).toEqual(['a1', 'a2'])
    a.go()
    await done
    expect(seen).toEqual(['a1', 'a2', 'b1', 'c1', 'c2'])
  })

  test("an earlier part's failure fails the read; a later part's failure is not left unobserved", async () => {
    const a = part(['a1'])
    const b = part(['b1'])
    const seen: string[] = []
    const done = inPartOrder([a.run, b.run], (p) => seen.push(p))
    b.fail(new Error('later'))
    a.fail(new Error('earlier'))
    await expect(done).rejects.toThrow('earlier')
    expect(seen).toEqual(['a1'])
  })

  test("held pages are handed over a turn of the event loop apart, in order, the part's later pages behind them", async () => {
    const a = part(['a1'])
    let emitB!: (p: string) => void
    let goB!: () => void
    const gateB = new Promise<void>((r) => {
      goB = r
    })
    const b = async (emit: (p: string) => void) => {
      emitB = emit
      for (const p of ['b1', 'b2', 'b3']) emit(p)
      await gateB
    }
    const seen: string[] = []
    let ticking = true
    // A request waiting on the event loop: it runs at each turn the walk takes.
    const tick = () => {
      if (!ticking) return
      if (seen.at(-1) !== 'turn') seen.push('turn')
      setImmediate(tick)
    }
    const done = inPartOrder([a.run, b], (p) => {
      seen.push(p)
      // A page of the part being handed over comes in meanwhile.
      if (p === 'b1') emitB('b4')
    })
    a.go()
    setImmediate(tick)
    goB()
    await done
    ticking = false
    expect(seen.filter((p) => p !== 'turn')).toEqual(['a1', 'b1', 'b2', 'b3', 'b4'])
    expect(seen.slice(seen.indexOf('b1'))).toEqual(['b1', 'turn', 'b2', 'turn', 'b3', 'turn', 'b4'])
  })
})

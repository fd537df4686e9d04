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
})

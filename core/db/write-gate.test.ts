import { describe, expect, test } from 'bun:test'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { WriteGate } from './write-gate'

const settledWithin = async (p: Promise<unknown>, ms: number) =>
  Promise.race([p.then(() => true), Bun.sleep(ms).then(() => false)])

describe('write gate', () => {
  test('one side at a time: a take waits for the give', async () => {
    const loop = new WriteGate()
    const thread = new WriteGate(loop.buffer, 2)
    expect(loop.tryTake()).toBe(true)
    expect(thread.tryTake()).toBe(false)
    const taken = thread.take()
    expect(await settledWithin(taken, 100)).toBe(false)
    loop.give()
    expect(await settledWithin(taken, 2000)).toBe(true)
    expect(loop.tryTake()).toBe(false)
    thread.give()
    expect(loop.tryTake()).toBe(true)
    loop.give()
  })

  test('a side that waited goes first: the one that just gave cannot take it back before it', async () => {
    const loop = new WriteGate()
    const thread = new WriteGate(loop.buffer, 2)
    expect(thread.tryTake()).toBe(true)
    expect(loop.tryTake()).toBe(false) // now waiting
    thread.give()
    // The thread gave it while the loop waited: the loop's turn.
    expect(thread.tryTake()).toBe(false)
    expect(loop.tryTake()).toBe(true)
    loop.give()
    // Nobody waits: the side that gave may take it again at once.
    thread.forget(2)
    expect(loop.tryTake()).toBe(true)
    loop.give()
  })

  test('forget frees the gate a dead side held', async () => {
    const loop = new WriteGate()
    const thread = new WriteGate(loop.buffer, 2)
    expect(thread.tryTake()).toBe(true)
    const taken = loop.take()
    new WriteGate(loop.buffer).forget(2)
    expect(await settledWithin(taken, 2000)).toBe(true)
    loop.give()
  })

  test('a worker thread and the event loop never hold it together (no update of a shared count is lost)', async () => {
    // Both sides add to a shared number by read, pause, write: without the gate, a write of one
    // side would overwrite the other's and the total would fall short.
    const dir = mkdtempSync(join(tmpdir(), 'liveops-gate-'))
    const file = join(dir, 'side.ts')
    writeFileSync(
      file,
      `import { WriteGate } from ${JSON.stringify(join(import.meta.dir, 'write-gate.ts'))}
declare const self: Worker
self.onmessage = async (m) => {
  const gate = new WriteGate(m.data.gate, 2)
  const count = new Int32Array(m.data.count)
  for (let i = 0; i < m.data.n; i++) {
    await gate.take()
    const v = count[0]
    await Bun.sleep(0)
    count[0] = v + 1
    gate.give()
  }
  self.postMessage('done')
}
`,
    )
    const gate = new WriteGate()
    const count = new SharedArrayBuffer(4)
    const n = 300
    const w = new Worker(file)
    const done = new Promise((resolve) => {
      w.onmessage = resolve
    })
    w.postMessage({ gate: gate.buffer, count, n })
    const c = new Int32Array(count)
    for (let i = 0; i < n; i++) {
      await gate.take()
      const v = c[0]
      await Bun.sleep(0)
      c[0] = v + 1
      gate.give()
    }
    await done
    w.terminate()
    expect(c[0]).toBe(2 * n)
  })
})

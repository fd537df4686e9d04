import { afterEach, describe, expect, test } from 'bun:test'
import type postgres from 'postgres'
import { StoreDown } from '../../core/db/faults'
import { WatchedPool } from '../../core/db/pg-pool'
import { until } from '../helpers'

/**
 * The pool's watch (core/db/pg-pool.ts) with stand-ins for postgres.js: the queries are promises
 * the test settles, the probe's `SELECT 1` answers when the test says. What it must tell apart: a
 * server that answers other queries while the probe waits its turn (sustained load, not an
 * outage), and one that answers nothing (down).
 */
type Probe = { answer: () => void; fail: () => void; ended: boolean }

function harness(limits = { probeMs: 300, busyMs: 3000 }) {
  const probes: Probe[] = []
  const seen: string[] = []
  const fakeSql = () =>
    Object.assign(() => undefined, { end: async () => undefined }) as unknown as postgres.Sql
  const probeOnce = () => {
    let answer: () => void = () => undefined
    let fail: () => void = () => undefined
    const settled = new Promise<void>((resolve, reject) => {
      answer = () => resolve()
      fail = () => reject(new Error('ECONNREFUSED'))
    })
    const p: Probe = { answer, fail, ended: false }
    probes.push(p)
    return Object.assign(() => settled, {
      end: async () => {
        p.ended = true
      },
    }) as unknown as postgres.Sql
  }
  const pool = new WatchedPool(
    fakeSql,
    probeOnce,
    { down: (cause) => seen.push(`down: ${cause}`), up: () => seen.push('up') },
    { at: 0 },
    limits,
  )
  /** A query that answers when `settle` is called. */
  const query = () => {
    let settle: () => void = () => undefined
    const done = pool.run(
      () =>
        new Promise<void>((r) => {
          settle = () => r()
        }),
    )
    return { done, settle }
  }
  return { pool, probes, seen, query }
}

describe('the PostgreSQL pool watch', () => {
  let close: (() => Promise<void>) | undefined
  afterEach(async () => {
    await close?.()
    close = undefined
  })

  test('a slow query on a server that answers others is load, not an outage: the probe waits its turn', async () => {
    const h = harness()
    close = () => h.pool.close()
    const slow = h.query()
    // Past SLOW_MS the watch probes.
    await until(() => h.probes.length === 1, { ms: 5000, what: 'a probe' })
    // The server keeps answering other queries while the probe's SELECT 1 waits, for several of
    // the probe's intervals.
    for (let i = 0; i < 12; i++) {
      const q = h.query()
      q.settle()
      await q.done
      await Bun.sleep(100)
    }
    expect(h.probes[0].ended).toBe(false)
    h.probes[0].answer()
    slow.settle()
    await slow.done
    await until(() => h.probes[0].ended, { what: 'the probe closed' })
    expect(h.seen).toEqual([])
    // Not refused: the store is up.
    const after = h.query()
    after.settle()
    await after.done
  })

  test("this process's own stalled loop is not the server's silence: answers that wait unread prove nothing", async () => {
    const h = harness()
    close = () => h.pool.close()
    const slow = h.query()
    await until(() => h.probes.length === 1, { ms: 5000, what: 'a probe' })
    // A long synchronous task holds the event loop over two of the probe's intervals.
    const until2 = performance.now() + 700
    while (performance.now() < until2) {}
    await Bun.sleep(100)
    h.probes[0].answer()
    slow.settle()
    await slow.done
    await until(() => h.probes[0].ended, { what: 'the probe closed' })
    expect(h.seen).toEqual([])
  })

  test('a server that answers nothing, the probe included, is down: queries are refused at once', async () => {
    const h = harness()
    close = () => h.pool.close()
    const slow = h.query()
    slow.done.catch(() => undefined)
    await until(() => h.seen.length > 0, { ms: 5000, what: 'the outage declared' })
    expect(h.seen[0]).toStartWith('down: no answer to a query within')
    expect(h.probes[0].ended).toBe(true)
    await expect(h.pool.run(async () => 1)).rejects.toBeInstanceOf(StoreDown)
    // Back: the next probe (every RETRY_MS) answers.
    await until(() => h.probes.length > 1, { ms: 5000, what: 'a retry probe' })
    h.probes[h.probes.length - 1].answer()
    await until(() => h.seen.includes('up'), { ms: 5000, what: 'the store up again' })
    expect(await h.pool.run(async () => 2)).toBe(2)
  })

  test('a probe whose connection fails is an outage at once, whatever else answered', async () => {
    const h = harness()
    close = () => h.pool.close()
    const slow = h.query()
    slow.done.catch(() => undefined)
    await until(() => h.probes.length === 1, { ms: 5000, what: 'a probe' })
    const q = h.query()
    q.settle()
    await q.done
    h.probes[0].fail()
    await until(() => h.seen.length > 0, { ms: 5000, what: 'the outage declared' })
    expect(h.seen[0]).toStartWith('down:')
  })

  test('a server that goes on answering others but never the probe counts as up after the busy limit', async () => {
    const h = harness({ probeMs: 200, busyMs: 800 })
    close = () => h.pool.close()
    const slow = h.query()
    await until(() => h.probes.length === 1, { ms: 5000, what: 'a probe' })
    while (!h.probes[0].ended) {
      const q = h.query()
      q.settle()
      await q.done
      await Bun.sleep(50)
    }
    expect(h.seen).toEqual([])
    slow.settle()
    await slow.done
  })
})

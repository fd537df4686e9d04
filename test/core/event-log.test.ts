import { expect, test } from 'bun:test'
import type { Db } from '../../core/db'
import { EventLog, PG_SEQ_SQL } from '../../core/event-log'
import { forEachEngine, until } from '../helpers'
import { append, counter, logSuite, outIds, quiet, testSource } from './log-fixture'

forEachEngine((engine) => {
  const s = logSuite(engine)
  const make = (instanceId: string, leaseMs = 10_000) => s.make(instanceId, { leaseMs })

  test('rows come in commit order, in batches, each once; the lag shows what is left', async () => {
    const seen: Array<{ ids: number[]; by: string }> = []
    const log = make('a')
    log.consume(counter('c', seen))
    await log.start()
    await log.stop()
    await append(s.db, [5, 3, 4])
    await append(
      s.db,
      Array.from({ length: 22 }, (_, i) => 100 - i),
    )
    const [st] = await log.status()
    expect(st.lagEvents).toBe(25)
    expect(st.lagSeconds).toBeGreaterThanOrEqual(0)
    await log.drain()
    const flat = seen.flatMap((s) => s.ids)
    // First transaction's rows first (by pos within it), then the second's.
    expect(flat.slice(0, 3)).toEqual([3, 4, 5])
    expect(flat.length).toBe(25)
    expect(new Set(flat).size).toBe(25)
    expect(Math.max(...seen.map((s) => s.ids.length))).toBe(10)
    expect(seen.length).toBe(3)
    const [after] = await log.status()
    expect(after.lagEvents).toBe(0)
    expect(after.delivered).toBe(25)
  })

  test('each consumer shows the rows after its own cursor, the log behind the slowest counted once', async () => {
    const log = new EventLog({ db: s.db, instanceId: 'a', log: quiet, pollMs: 20 })
    s.track(log)
    // The rows each of the source's counts went over (what it added of `until` left out).
    let counted = 0
    const plain = testSource()
    log.provide({
      ...plain,
      async pending(at, db, o) {
        const p = await plain.pending(at, db, o)
        counted += p.rows - (o?.until?.rows ?? 0)
        return p
      },
    })
    for (const name of ['c1', 'c2', 'c3', 'c4']) log.consume(counter(name, []))
    await log.start()
    await log.stop()
    await append(s.db, [1, 2, 3])
    await append(s.db, [4, 5])
    await append(s.db, [6, 7, 8, 9])
    const rows = await testSource().read({ seq: 0, pos: 0 }, Number.MAX_SAFE_INTEGER, 100, s.db)
    expect(rows.length).toBe(9)
    // c1 after the second row, c2 and c3 after the fifth, c4 at the end.
    const put = (name: string, i: number) =>
      s.db.run('UPDATE liveops_consumers SET seq = ?, pos = ? WHERE name = ?', [
        rows[i].at.seq,
        rows[i].at.pos,
        name,
      ])
    await put('c1', 1)
    await put('c2', 4)
    await put('c3', 4)
    await put('c4', 8)
    const st = Object.fromEntries((await log.status()).map((s) => [s.name, s.lagEvents]))
    expect(st).toEqual({ c1: 7, c2: 4, c3: 4, c4: 0 })
    expect(counted).toBe(7)
    // The times alone: every lag in events reads 0, the time each is complete to stays.
    const times = await log.status({ counts: false })
    expect(times.map((s) => s.lagEvents)).toEqual([0, 0, 0, 0])
    // (c4 has nothing left: complete to now, which moves.)
    expect(times.map((s) => s.asOf).slice(0, 3)).toEqual((await log.status()).map((s) => s.asOf).slice(0, 3))
  })

  test('a handler that throws rolls its writes back with the cursor: the rows come again, counted once', async () => {
    const seen: Array<{ ids: number[]; by: string }> = []
    const base = counter('c', seen)
    let fail = true
    const log = make('a')
    log.consume({
      ...base,
      async handle(rows, tx) {
        await base.handle(rows, tx)
        if (fail) throw new Error('boom')
      },
    })
    await log.start()
    await log.stop()
    await append(s.db, [1, 2, 3])
    // On PostgreSQL the rows are read once every older transaction of the database finished:
    // other tests' share this one, so the first steps may find nothing yet.
    await until(async () => {
      try {
        await log.step('c')
        return false
      } catch (e) {
        return String(e).includes('boom')
      }
    })
    expect(await outIds(s.db)).toEqual([])
    expect((await log.status())[0].lastError).toContain('boom')
    fail = false
    await log.drain()
    expect(await outIds(s.db)).toEqual([1, 2, 3])
    expect((await log.status())[0].lastError).toBeNull()
  })

  if (engine === 'postgres')
    test('a row an older transaction commits late is not skipped', async () => {
      const seen: Array<{ ids: number[]; by: string }> = []
      const log = make('a')
      log.consume(counter('c', seen))
      await log.start()
      await log.stop()
      let release = () => {}
      const gate = new Promise<void>((r) => {
        release = r
      })
      let inserted = () => {}
      const started = new Promise<void>((r) => {
        inserted = r
      })
      const older = s.db.tx(async (tx) => {
        await tx.run(`INSERT INTO log_test (seq, id, received_at, ts) VALUES (${PG_SEQ_SQL}, 1, 0, 1)`)
        inserted()
        await gate
      })
      await started
      await append(s.db, [2])
      // The newer row is committed, but the older transaction is still in flight: nothing is read.
      expect(await log.step('c')).toBe(0)
      release()
      await older
      await log.drain()
      expect(seen.flatMap((s) => s.ids)).toEqual([1, 2])
      expect(await outIds(s.db)).toEqual([1, 2])
    })

  test('two instances: one runs a consumer; the other takes over within seconds when it dies', async () => {
    const seen: Array<{ ids: number[]; by: string }> = []
    const a = make('a', 400)
    const b = make('b', 400)
    a.consume(counter('c', seen, 'a', 3))
    b.consume(counter('c', seen, 'b', 3))
    await a.start()
    await b.start()
    for (let i = 0; i < 5; i++) {
      await append(s.db, [i * 10 + 1, i * 10 + 2])
      await Bun.sleep(30)
    }
    await until(async () => (await outIds(s.db)).length === 10)
    expect(new Set(seen.map((s) => s.by)).size).toBe(1)
    const first = seen[0].by
    const dead = first === 'a' ? a : b
    // Dies without giving its lease back: the survivor takes over once the lease lapses.
    ;(dead as unknown as { running: boolean }).running = false
    dead.notify()
    // Its loop ends after the step in flight, if any (a busy machine can hold one past the next
    // append, which it would then take in itself): only then do rows come that it must not see.
    await Promise.all((dead as unknown as { loops: Promise<void>[] }).loops)
    await append(s.db, [100, 101])
    // The batch as recorded after its commit (log_out shows the rows a moment before that).
    const taken = await until(() => seen.find((s) => s.ids.includes(101)), {
      ms: 5000,
      what: 'the survivor to take over',
    })
    expect(taken.by).toBe(first === 'a' ? 'b' : 'a')
    expect(seen.filter((s) => s.by === first).flatMap((s) => s.ids)).not.toContain(100)
    expect(await outIds(s.db)).toContain(101)
  })

  test("drained means every step's after-commit work is done, not only its commit", async () => {
    const seen: Array<{ ids: number[]; by: string }> = []
    // A store whose transactions answer 300 ms after they commit: the cursor shows the batch
    // well before the step that took it ends.
    const slow = new Proxy(s.db, {
      get(target, key) {
        if (key === 'tx')
          return async <T>(fn: (tx: Db) => Promise<T>) => {
            const r = await target.tx(fn)
            await Bun.sleep(300)
            return r
          }
        const v = Reflect.get(target, key)
        return typeof v === 'function' ? v.bind(target) : v
      },
    })
    const log = new EventLog({ db: slow, instanceId: 'a', log: quiet, pollMs: 20 })
    log.provide(testSource())
    s.track(log)
    log.consume(counter('c', seen))
    await log.start()
    await append(s.db, [1, 2, 3])
    await until(async () => (await outIds(s.db)).length === 3)
    await log.drain()
    expect(seen.flatMap((s) => s.ids)).toEqual([1, 2, 3])
  })

  test("the source learns now and then where the slowest of this process's consumers is", async () => {
    const trims: Array<{ seq: number; pos: number }> = []
    const log = new EventLog({ db: s.db, instanceId: 'a', log: quiet, pollMs: 20, trimMs: 0 })
    s.track(log)
    log.provide({ ...testSource(), trim: async (at) => void trims.push(at) })
    // 'slow' holds its first batch until the gate opens (outside any transaction: `prepare`).
    const { promise: gate, resolve: open } = Promise.withResolvers<void>()
    log.consume(counter('fast', []))
    log.consume({ ...counter('slow', []), prepare: () => gate })
    // Another process's consumer, at the log's start, is not this one's to wait for.
    await s.db.run("INSERT INTO liveops_consumers (name, seq, pos) VALUES ('elsewhere', 0, 0)")
    await log.start()
    await append(s.db, [1, 2, 3])
    const head = await testSource().head(s.db)
    await until(async () => (await outIds(s.db, 'fast')).length === 3 && trims.length > 0)
    // Where a new consumer starts (core/event-log.ts `start`): 'slow' has not moved.
    const start = { seq: 0, pos: Number.MAX_SAFE_INTEGER }
    expect(trims.every((t) => t.seq === start.seq && t.pos === start.pos)).toBe(true)
    open()
    await until(async () => trims.some((t) => t.seq === head.seq && t.pos === head.pos))
    await log.stop()
    // With no consumer in the process (analytics and experiments off), the head: nothing is kept.
    const none = s.track(new EventLog({ db: s.db, instanceId: 'b', log: quiet, trimMs: 0 }))
    const alone: Array<{ seq: number; pos: number }> = []
    none.provide({ ...testSource(), trim: async (at) => void alone.push(at) })
    await none.start()
    await until(async () => alone.length > 0)
    expect(alone[0]).toEqual(head)
  })

  test('a reset cut short between two slices (its instance hangs) is finished by the next holder: each row counted once', async () => {
    const seen: Array<{ ids: number[]; by: string }> = []
    const a = make('a', 400)
    const plain = counter('c', seen, 'a')
    // 'a' hangs at its reset's second pause, its lease running out (as a process killed there).
    const { promise: hang, resolve: wake } = Promise.withResolvers<void>()
    let pauses = 0
    a.consume({
      ...plain,
      reset: (from, db, pause) =>
        plain.reset(from, db, async () => {
          if (++pauses === 2) await hang
          await pause()
        }),
    })
    await a.start()
    await append(s.db, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    await a.drain()
    await a.rebuild('c', 3)
    await until(() => pauses === 2, { what: 'the reset to reach its second pause' })
    // Woken whatever happens below: a test failing here would otherwise leave it hung for good.
    const mark = seen.length
    const b = make('b', 400)
    b.consume(counter('c', seen, 'b'))
    try {
      // Two slices of two rows went; the rebuild is still asked, the cursor where it was, and the lag
      // is counted from the log's start (what is left of the results is not complete to now).
      expect(await outIds(s.db)).toEqual([1, 2, 7, 8, 9, 10])
      expect((await a.status())[0]).toMatchObject({ rebuilding: true, delivered: 10, lagEvents: 10 })
      await b.start()
      await until(
        async () => (await b.status())[0].rebuilding === false && (await outIds(s.db)).length === 10,
        {
          ms: 5000,
          what: 'the next holder to finish the rebuild',
        },
      )
      await b.drain()
    } finally {
      // The hung instance wakes: its lease is gone, so it deletes nothing more, and moves nothing.
      wake()
    }
    expect(await a.step('c')).toBe(0)
    await b.drain()
    expect(await outIds(s.db)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    const again = seen.slice(mark)
    expect(again.every((x) => x.by === 'b')).toBe(true)
    expect(again.flatMap((x) => x.ids).sort((x, y) => x - y)).toEqual([3, 4, 5, 6, 7, 8, 9, 10])
  })

  test('a stop ends a reset between two slices; the next start finishes it, each row counted once', async () => {
    const seen: Array<{ ids: number[]; by: string }> = []
    const a = make('a')
    const plain = counter('c', seen, 'a')
    let stopped: Promise<void> | undefined
    let pauses = 0
    a.consume({
      ...plain,
      reset: (from, db, pause) =>
        plain.reset(from, db, async () => {
          if (++pauses === 2) stopped = a.stop()
          await pause()
        }),
    })
    await a.start()
    await append(s.db, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    await a.drain()
    await a.rebuild('c', 3)
    await until(() => stopped !== undefined, { what: 'the reset to reach its second pause' })
    await stopped
    // It stopped at that pause: two slices of two rows went, the rebuild is still asked.
    expect(pauses).toBe(2)
    expect(await outIds(s.db)).toEqual([1, 2, 7, 8, 9, 10])
    expect((await a.status())[0]).toMatchObject({ rebuilding: true, delivered: 10, lagEvents: 10 })
    const mark = seen.length
    const next = make('a')
    next.consume(counter('c', seen, 'next'))
    await next.start()
    await next.drain()
    expect(await outIds(s.db)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    const again = seen.slice(mark)
    expect(again.every((x) => x.by === 'next')).toBe(true)
    expect(again.flatMap((x) => x.ids).sort((x, y) => x - y)).toEqual([3, 4, 5, 6, 7, 8, 9, 10])
  })

  test('a rebuild from a date recomputes the later results from the log while appends go on', async () => {
    const seen: Array<{ ids: number[]; by: string }> = []
    const log = make('a')
    log.consume(counter('c', seen))
    await log.start()
    await append(s.db, [1, 2, 3, 4, 5, 6, 7, 8])
    await log.drain()
    const before = seen.length
    await log.rebuild('c', 5)
    await append(s.db, [9, 10])
    await log.drain()
    expect(await outIds(s.db)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    // Only the rows at or after the date came again.
    const again = seen.slice(before).flatMap((s) => s.ids)
    expect(again.sort((x, y) => x - y)).toEqual([5, 6, 7, 8, 9, 10])
    expect((await log.status())[0].rebuilding).toBe(false)
    // A whole rebuild: every row comes again, and each is counted once.
    const mark = seen.length
    await log.rebuild('c')
    expect((await log.status())[0].rebuilding).toBe(true)
    await log.drain()
    expect(
      seen
        .slice(mark)
        .flatMap((s) => s.ids)
        .sort((x, y) => x - y),
    ).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    expect(await outIds(s.db)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
  })
})

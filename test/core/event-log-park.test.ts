import { expect, test } from 'bun:test'
import type { EventLog, LogConsumer, LogRow } from '../../core/event-log'
import { MAX_BACKOFF_MS, PARK_AFTER, Parking, transient } from '../../core/event-log-park'
import { Metrics } from '../../core/metrics'
import { forEachEngine, until } from '../helpers'
import { append, counter, logSuite, outIds } from './log-fixture'

/** A counter (log-fixture) whose `handle` throws `error(row)` for the rows it names. */
function poisoned(name: string, error: (r: LogRow) => string | undefined, batch = 10): LogConsumer {
  const base = counter(name, [], 'a', batch)
  return {
    ...base,
    async handle(rows, tx) {
      for (const r of rows) {
        const e = error(r)
        if (e) throw new Error(e)
      }
      return base.handle(rows, tx)
    },
  }
}

/** Steps `name` by hand, as the loop would (errors caught), until it has nothing to take or `max` steps. */
async function stepAll(log: EventLog, name: string, max = 200): Promise<string[]> {
  const errors: string[] = []
  for (let i = 0; i < max; i++) {
    try {
      if ((await log.step(name)) === 0) return errors
    } catch (e) {
      errors.push(String(e))
    }
  }
  return errors
}

const ids = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i)

forEachEngine((engine) => {
  const s = logSuite(engine)
  const make = (metrics?: Metrics) => s.make('a', { metrics })

  test('rows the consumer fails on every time are set aside, every other row counted once; a rebuild delivers them again', async () => {
    let broken = true
    const log = make()
    log.consume(
      poisoned('c', (r) => (broken && (r.id === 17 || r.id === 25) ? `cannot count ${r.id}` : undefined)),
    )
    await log.start()
    await log.stop()
    await append(s.db, ids(1, 12))
    await append(s.db, ids(13, 18))
    // On PostgreSQL rows are read once every older transaction finished: step until all came.
    let errors: string[] = []
    await until(async () => {
      errors = errors.concat(await stepAll(log, 'c'))
      return (await log.status())[0].lagEvents === 0
    })
    expect(await outIds(s.db)).toEqual(ids(1, 30).filter((i) => i !== 17 && i !== 25))
    // Each batch of ten was read in halves down to the row, which then failed alone three times.
    expect(errors.every((e) => /cannot count (17|25)/.test(e))).toBe(true)
    expect(errors.length).toBeGreaterThanOrEqual(2 * (PARK_AFTER + 1))
    const parked = await s.db.all<Record<string, unknown>>(
      'SELECT * FROM liveops_consumer_parked ORDER BY pos',
    )
    expect(parked.map((p) => Number(p.pos))).toEqual([17, 25])
    expect(parked[0]).toMatchObject({ consumer: 'c', game_id: 'g', env: 'live', event: 'e' })
    expect(String(parked[0].error)).toContain('cannot count 17')
    const [st] = await log.status()
    expect(st).toMatchObject({ parked: 2, lastError: null, lagEvents: 0, delivered: 28 })
    expect(((await log.health()).consumers as Record<string, { parked: number }>).c.parked).toBe(2)

    // The definition fixed: a rebuild counts the row and forgets it was parked.
    broken = false
    await log.rebuild('c')
    expect(await stepAll(log, 'c')).toEqual([])
    expect(await outIds(s.db)).toEqual(ids(1, 30))
    expect((await log.status())[0].parked).toBe(0)
  })

  test('an error every row meets parks one row, then the consumer stops on it, naming the error', async () => {
    const log = make()
    log.consume(poisoned('c', () => 'no such table: results'))
    await log.start()
    await log.stop()
    await append(s.db, ids(1, 8))
    await until(async () => {
      await stepAll(log, 'c', 40)
      return (await log.status())[0].parked === 1
    })
    await stepAll(log, 'c', 40)
    const [st] = await log.status()
    expect(st.parked).toBe(1)
    expect(st.lastError).toContain('no such table')
    expect(st.lagEvents).toBe(7)
    expect(await outIds(s.db)).toEqual([])
  })

  test("the store's own errors never park a row: the batch waits for the store", async () => {
    let down = true
    const log = make()
    log.consume(poisoned('c', (r) => (down && r.id === 3 ? 'SQLITE_BUSY: database is locked' : undefined)))
    await log.start()
    await log.stop()
    await append(s.db, ids(1, 6))
    await until(async () => {
      await stepAll(log, 'c', 30)
      return (await log.status())[0].lastError !== null
    })
    await stepAll(log, 'c', 30)
    expect((await log.status())[0]).toMatchObject({ parked: 0, lagEvents: 6 })
    down = false
    await until(async () => {
      await stepAll(log, 'c')
      return (await log.status())[0].lagEvents === 0
    })
    expect(await outIds(s.db)).toEqual(ids(1, 6))
    expect((await log.status())[0].parked).toBe(0)
    expect(transient(new Error('connection terminated unexpectedly'))).toBe(true)
    expect(transient(new Error("Cannot read properties of undefined (reading 'x')"))).toBe(false)
  })

  test('running on its own, a consumer parks the row, goes on, and shows it on the metrics', async () => {
    const metrics = new Metrics()
    const log = make(metrics)
    log.consume(poisoned('c', (r) => (r.id === 5 ? 'bad row' : undefined), 4))
    await append(s.db, ids(1, 9))
    await log.start()
    await until(async () => (await outIds(s.db)).length === 8, {
      ms: 15_000,
      what: 'the rows around the parked one',
    })
    expect(await outIds(s.db)).toEqual([1, 2, 3, 4, 6, 7, 8, 9])
    expect(await metrics.text()).toMatch(/svc_consumer_parked_events\{consumer="c"\} 1/)
    await append(s.db, [10])
    await until(async () => (await outIds(s.db)).includes(10))
  })
})

test('a failing consumer waits longer after each failure, up to a limit, and not while a batch is halved', () => {
  const p = new Parking()
  const entry = (pos: number) => ({ at: { seq: 1, pos }, row: {} as LogRow })
  const batch = [1, 2, 3, 4].map(entry)
  expect(p.failed('c', batch, new Error('bad row'), { seq: 1, pos: 0 })).toBe(false)
  expect(p.limit('c', { seq: 1, pos: 0 }, 10)).toBe(2)
  expect(p.delay('c', 20)).toBe(20)
  expect(p.failed('c', batch.slice(0, 2), new Error('bad row'), { seq: 1, pos: 0 })).toBe(false)
  expect(p.limit('c', { seq: 1, pos: 0 }, 10)).toBe(1)
  expect(p.failed('c', batch.slice(0, 1), new Error('bad row'), { seq: 1, pos: 0 })).toBe(false)
  expect(p.delay('c', 20)).toBe(80)
  // A cursor moved back before the failed batch (a rebuild) reads whole again, and so does one
  // past the batch's last row.
  const q = new Parking()
  q.failed('c', [entry(5), entry(6)], new Error('bad row'), { seq: 1, pos: 4 })
  expect(q.limit('c', { seq: 1, pos: 4 }, 10)).toBe(1)
  expect(q.limit('c', { seq: 0, pos: 9 }, 10)).toBe(10)
  expect(q.limit('c', { seq: 1, pos: 4 }, 10)).toBe(10)
  expect(p.limit('c', { seq: 1, pos: 4 }, 10)).toBe(10)
  for (let i = 0; i < 30; i++) p.failed('c', [], new Error('connection refused'), { seq: 1, pos: 0 })
  expect(p.delay('c', 20)).toBe(MAX_BACKOFF_MS)
  p.succeeded('c')
  expect(p.delay('c', 20)).toBe(20)
})

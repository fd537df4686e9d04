import { afterEach, beforeEach, expect, test } from 'bun:test'
import { coreMigrations } from '../../core/auth/migrations'
import { type Db, migrate } from '../../core/db'
import {
  EventLog,
  type LogConsumer,
  type LogEntry,
  type LogRow,
  type LogSource,
  PG_SEQ_SQL,
} from '../../core/event-log'
import { createLogger } from '../../core/log'
import { forEachEngine, rawDb, until } from '../helpers'
import { logRow } from '../log-row'

const quiet = createLogger(
  { level: 'error', format: 'json', max_size: 1, max_backups: 1, max_age: 1, sensitive_fields: [] },
  () => undefined,
)

/** A log of plain events in one table; seq is the xid on PostgreSQL, a commit counter on SQLite. */
function testSource(): LogSource {
  const entry = (r: Record<string, unknown>): LogEntry => ({
    at: { seq: Number(r.seq), pos: Number(r.id) },
    row: logRow({
      id: Number(r.id),
      receivedAt: Number(r.received_at),
      ts: Number(r.ts),
      userId: r.user_id as string,
    }),
  })
  const after = '(seq > ? OR (seq = ? AND id > ?))'
  return {
    async read(at, below, limit, db) {
      const rows = await db.all(
        `SELECT * FROM log_test WHERE ${after} AND seq < ? ORDER BY seq, id LIMIT ?`,
        [at.seq, at.seq, at.pos, below, limit],
      )
      return rows.map(entry)
    },
    async pending(at, db, o = {}) {
      const r = await db.get<{ t: number | null }>(
        `SELECT MIN(received_at) AS t FROM log_test WHERE ${after}`,
        [at.seq, at.seq, at.pos],
      )
      const upTo = o.until ? ' AND (seq < ? OR (seq = ? AND id <= ?))' : ''
      const u = o.until?.at
      const n = await db.get<{ n: number }>(
        `SELECT COUNT(*) AS n FROM log_test WHERE ${after}${upTo}`,
        u ? [at.seq, at.seq, at.pos, u.seq, u.seq, u.pos] : [at.seq, at.seq, at.pos],
      )
      return {
        rows: o.count === false ? 0 : Number(n?.n ?? 0) + (o.until?.rows ?? 0),
        oldestReceivedAt: r?.t == null ? null : Number(r.t),
      }
    },
    async head(db) {
      const r = await db.get<{ seq: number; id: number }>(
        'SELECT seq, id FROM log_test ORDER BY seq DESC, id DESC LIMIT 1',
      )
      return r ? { seq: Number(r.seq), pos: Number(r.id) } : { seq: 0, pos: 0 }
    },
  }
}

/** Appends rows `ids` in one transaction (ts = id), as a provider would. */
async function append(db: Db, ids: number[]): Promise<void> {
  await db.tx(async (tx) => {
    const seq =
      db.dialect === 'postgres'
        ? PG_SEQ_SQL
        : String(
            Number((await tx.get<{ s: number }>('SELECT COALESCE(MAX(seq), 0) + 1 AS s FROM log_test'))?.s),
          )
    for (const id of ids)
      await tx.run(`INSERT INTO log_test (seq, id, received_at, ts, user_id) VALUES (${seq}, ?, ?, ?, ?)`, [
        id,
        Date.now(),
        id,
        `u${id}`,
      ])
  })
}

/** A consumer writing each row's id into log_out (primary key: a second delivery fails); `seen` lists its committed batches. */
function counter(
  name: string,
  seen: Array<{ ids: number[]; by: string }>,
  by = 'a',
  batch = 10,
): LogConsumer {
  return {
    name,
    batch,
    rebuildsFrom: true,
    async handle(rows: LogRow[], tx: Db) {
      for (const r of rows)
        await tx.run('INSERT INTO log_out (consumer, id, ts) VALUES (?, ?, ?)', [name, r.id, r.ts])
      // Recorded once the batch committed: an attempt rolled back (a rebuild asked meanwhile, a
      // lost lease) is not a delivery.
      const ids = rows.map((r) => r.id)
      return () => seen.push({ ids, by })
    },
    async reset(from, tx) {
      await tx.run('DELETE FROM log_out WHERE consumer = ? AND ts >= ?', [name, from ?? 0])
    },
  }
}

async function outIds(db: Db, name = 'c'): Promise<number[]> {
  const rows = await db.all<{ id: number }>('SELECT id FROM log_out WHERE consumer = ? ORDER BY id', [name])
  return rows.map((r) => Number(r.id))
}

forEachEngine((engine) => {
  let db: Db
  let done: () => Promise<void>
  const logs: EventLog[] = []
  const make = (instanceId: string, leaseMs = 10_000) => {
    const l = new EventLog({ db, instanceId, log: quiet, leaseMs, pollMs: 20 })
    l.provide(testSource())
    logs.push(l)
    return l
  }

  beforeEach(async () => {
    ;({ db, done } = await rawDb(engine))
    await migrate(db, [{ plugin: 'core', migrations: coreMigrations }])
    await db.exec(`CREATE TABLE log_test (seq BIGINT NOT NULL, id BIGINT NOT NULL, received_at BIGINT NOT NULL,
      ts BIGINT NOT NULL, user_id TEXT, PRIMARY KEY (seq, id));
      CREATE TABLE log_out (consumer TEXT NOT NULL, id BIGINT NOT NULL, ts BIGINT NOT NULL, PRIMARY KEY (consumer, id))`)
  })
  afterEach(async () => {
    for (const l of logs.splice(0)) await l.stop()
    await done()
  })

  test('rows come in commit order, in batches, each once; the lag shows what is left', async () => {
    const seen: Array<{ ids: number[]; by: string }> = []
    const log = make('a')
    log.consume(counter('c', seen))
    await log.start()
    await log.stop()
    await append(db, [5, 3, 4])
    await append(
      db,
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
    const log = new EventLog({ db, instanceId: 'a', log: quiet, pollMs: 20 })
    logs.push(log)
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
    await append(db, [1, 2, 3])
    await append(db, [4, 5])
    await append(db, [6, 7, 8, 9])
    const rows = await testSource().read({ seq: 0, pos: 0 }, Number.MAX_SAFE_INTEGER, 100, db)
    expect(rows.length).toBe(9)
    // c1 after the second row, c2 and c3 after the fifth, c4 at the end.
    const put = (name: string, i: number) =>
      db.run('UPDATE liveops_consumers SET seq = ?, pos = ? WHERE name = ?', [
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
    await append(db, [1, 2, 3])
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
    expect(await outIds(db)).toEqual([])
    expect((await log.status())[0].lastError).toContain('boom')
    fail = false
    await log.drain()
    expect(await outIds(db)).toEqual([1, 2, 3])
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
      const older = db.tx(async (tx) => {
        await tx.run(`INSERT INTO log_test (seq, id, received_at, ts) VALUES (${PG_SEQ_SQL}, 1, 0, 1)`)
        inserted()
        await gate
      })
      await started
      await append(db, [2])
      // The newer row is committed, but the older transaction is still in flight: nothing is read.
      expect(await log.step('c')).toBe(0)
      release()
      await older
      await log.drain()
      expect(seen.flatMap((s) => s.ids)).toEqual([1, 2])
      expect(await outIds(db)).toEqual([1, 2])
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
      await append(db, [i * 10 + 1, i * 10 + 2])
      await Bun.sleep(30)
    }
    await until(async () => (await outIds(db)).length === 10)
    expect(new Set(seen.map((s) => s.by)).size).toBe(1)
    const first = seen[0].by
    const dead = first === 'a' ? a : b
    // Dies without giving its lease back: the survivor takes over once the lease lapses.
    ;(dead as unknown as { running: boolean }).running = false
    dead.notify()
    // Its loop ends after the step in flight, if any (a busy machine can hold one past the next
    // append, which it would then take in itself): only then do rows come that it must not see.
    await Promise.all((dead as unknown as { loops: Promise<void>[] }).loops)
    await append(db, [100, 101])
    // The batch as recorded after its commit (log_out shows the rows a moment before that).
    const taken = await until(() => seen.find((s) => s.ids.includes(101)), {
      ms: 5000,
      what: 'the survivor to take over',
    })
    expect(taken.by).toBe(first === 'a' ? 'b' : 'a')
    expect(seen.filter((s) => s.by === first).flatMap((s) => s.ids)).not.toContain(100)
    expect(await outIds(db)).toContain(101)
  })

  test("drained means every step's after-commit work is done, not only its commit", async () => {
    const seen: Array<{ ids: number[]; by: string }> = []
    // A store whose transactions answer 300 ms after they commit: the cursor shows the batch
    // well before the step that took it ends.
    const slow = new Proxy(db, {
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
    logs.push(log)
    log.consume(counter('c', seen))
    await log.start()
    await append(db, [1, 2, 3])
    await until(async () => (await outIds(db)).length === 3)
    await log.drain()
    expect(seen.flatMap((s) => s.ids)).toEqual([1, 2, 3])
  })

  test('a rebuild from a date recomputes the later results from the log while appends go on', async () => {
    const seen: Array<{ ids: number[]; by: string }> = []
    const log = make('a')
    log.consume(counter('c', seen))
    await log.start()
    await append(db, [1, 2, 3, 4, 5, 6, 7, 8])
    await log.drain()
    const before = seen.length
    await log.rebuild('c', 5)
    await append(db, [9, 10])
    await log.drain()
    expect(await outIds(db)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
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
    expect(await outIds(db)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
  })
})

import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { orderPlugins } from '../../core/app'
import { type Db, migrate } from '../../core/db'
import { migrationSets } from '../../core/migration-sets'
import { plugins } from '../../plugins'
import { type TestApp, engines, makeApp, rawDb } from '../helpers'

// PostgreSQL test apps get a database copied from their plugins' migrated template, reused once an
// app gives it back (test/pg-template.ts, test/pg-reuse.ts): what an app finds must be what
// migrating a fresh schema gives, whichever way its store came.

const sets = migrationSets(orderPlugins(Object.keys(plugins), plugins))
const game = { name: 'Copied', genre: 'RPG', platforms: ['ANDROID'], timezone: 'UTC', defaultCurrency: 'USD' }

/** Every table's rows (the ledger without its times), and every sequence's last value. */
async function contents(db: Db): Promise<Record<string, unknown>> {
  const tables = await db.all<{ t: string }>(
    'SELECT tablename AS t FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1',
  )
  const out: Record<string, unknown> = {}
  for (const { t } of tables) {
    const rows = await db.all<Record<string, unknown>>(`SELECT * FROM ${t}`)
    out[t] = rows.map(({ applied_at: _, ...r }) => JSON.stringify(r)).sort()
  }
  out.sequences = await db.all(
    'SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = current_schema() ORDER BY 1',
  )
  return out
}

describe.if(engines.includes('postgres'))('[postgres] test stores from a migrated template', () => {
  let fresh: Awaited<ReturnType<typeof rawDb>>
  let expected: Record<string, unknown>
  beforeAll(async () => {
    fresh = await rawDb('postgres')
    await migrate(fresh.db, sets)
    expected = await contents(fresh.db)
  })
  afterAll(() => fresh.done())

  let a: TestApp | undefined
  afterAll(() => a?.stop())

  test('an app finds every table, the whole ledger, every seeded row and nothing to migrate; given back, its store is as new for the next', async () => {
    const before = await makeApp('postgres')
    a = before
    expect(new URL(before.pgUrl ?? '').pathname).toMatch(/^\/t_[0-9a-f]{12}_[0-9a-f]{12}_[0-9a-f]{8}$/)
    expect(await migrate(before.db, sets)).toEqual([])
    // What a test leaves: rows of its own, seeded rows changed or gone, a sequence moved on.
    const admin = await before.token('admin')
    expect((await before.req('POST', '/api/games', { token: admin, body: game })).status).toBe(201)
    await before.db.run('DELETE FROM agents_revision')
    await before.db.run('UPDATE ingest_log_head SET seq = 99')
    await before.db.run('DELETE FROM liveops_migrations WHERE plugin = ?', ['games'])
    for (const { s } of await before.db.all<{ s: string }>(
      "SELECT schemaname || '.' || sequencename AS s FROM pg_sequences WHERE schemaname = current_schema()",
    ))
      await before.db.get(`SELECT nextval('${s}')`)
    await before.stop()
    a = undefined

    // The next app of the same plugins gets the same database back (made as new), and what the
    // migrations made is there exactly: compared before the app writes, through a bare store.
    const after = await makeApp('postgres')
    a = after
    expect(after.pgUrl).toBe(before.pgUrl)
    expect(await migrate(after.db, sets)).toEqual([])
    const now = await contents(after.db)
    // The app's own start writes users, consumers and schedules: those tables only hold more.
    for (const [t, rows] of Object.entries(expected))
      if (Array.isArray(rows) && rows.length) expect([t, now[t]]).toEqual([t, rows])
    expect(now.games).toEqual([])
    expect(now.sequences).toEqual(expected.sequences)
    expect((await after.req('GET', '/api/games', { token: await after.token('admin') })).body.items).toEqual(
      [],
    )
  })

  test('a store a test altered is not given to the next app', async () => {
    a ??= await makeApp('postgres')
    const altered = a
    await altered.db.exec('CREATE TABLE probe_left_behind (id INT)')
    await altered.stop()
    a = await makeApp('postgres')
    expect(a.pgUrl).not.toBe(altered.pgUrl)
    expect(await a.db.get("SELECT to_regclass('probe_left_behind') AS t")).toEqual({ t: null })
    expect(Object.keys(await contents(a.db)).sort()).toEqual(Object.keys(expected).sort())
  })
})

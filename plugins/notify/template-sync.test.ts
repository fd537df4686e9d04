import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { migrate } from '../../core/db'
import { heldReads } from '../../test/held-reads'
import { type TestApp, engines, forEachEngine, makeApp, rawDb, until } from '../../test/helpers'
import notify from './index'
import { templateStore } from './templates'

// Templates are read from a copy of them all. Another instance's write reaches that copy (it
// never did: an instance kept the templates it read first until it restarted), and a load under
// way when this instance wrote does not put the older templates back.

const tpl = (title: string) => ({ name: 'Patch notes', title, level: 'info' as const })

forEachEngine((engine) => {
  test("a load of the templates begun before this instance's write does not undo it", async () => {
    const { db, done } = await rawDb(engine)
    try {
      // The first migration holds the templates' table (the later ones reach into core's tables).
      await migrate(db, [{ plugin: 'notify', migrations: (notify.migrations ?? []).slice(0, 1) }])
      const held = heldReads(db, 'all', (sql) => sql.includes('FROM notify_templates'))
      const published: string[] = []
      const templates = templateStore(held.db, (id) => published.push(id))
      await templates.create({ id: 'patch', ...tpl('Patch {{.v}}') })
      const release = held.hold()
      const listing = templates.list()
      await held.reached(1)
      await templates.update('patch', tpl('Hotfix {{.v}}'))
      release()
      expect((await listing).map((t) => t.title)).toEqual(['Hotfix {{.v}}'])
      expect((await templates.get('patch')).title).toBe('Hotfix {{.v}}')
      // The load that met the write was read again; both writes were announced.
      expect(held.reads()).toBe(2)
      expect(published).toEqual(['patch', 'patch'])
    } finally {
      await done()
    }
  })
})

describe.if(engines.includes('postgres'))('[postgres] two instances', () => {
  let a: TestApp
  let b: TestApp
  beforeAll(async () => {
    // The periodic safety net out of reach: the change notices alone carry the writes.
    const plugins = { notify: { auth: { enabled: false }, queue: { sync_ms: 600_000 } } }
    a = await makeApp('postgres', { plugins })
    b = await makeApp('postgres', { plugins, store: a })
  })
  afterAll(async () => {
    await b.stop()
    await a.stop()
  })

  test("a template created, changed and deleted through one instance is the other's at once", async () => {
    // B reads (and keeps) the templates before A writes.
    expect((await b.req('GET', '/api/v1/templates')).body.data.count).toBe(0)
    const made = await a.req('POST', '/api/v1/templates/create', {
      body: { id: 'raid', ...tpl('Raid {{.boss}}') },
    })
    expect(made.status).toBe(200)
    await until(async () => (await b.req('GET', '/api/v1/templates/raid')).status === 200, 10_000)
    expect((await a.req('PUT', '/api/v1/templates/raid', { body: tpl('Raid boss {{.boss}}') })).status).toBe(
      200,
    )
    await until(
      async () => (await b.req('GET', '/api/v1/templates/raid')).body.data?.title === 'Raid boss {{.boss}}',
      10_000,
    )
    expect((await a.req('DELETE', '/api/v1/templates/raid')).status).toBe(200)
    await until(async () => (await b.req('GET', '/api/v1/templates/raid')).status === 404, 10_000)
  }, 20_000)
})

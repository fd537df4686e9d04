import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { ADMIN_PASSWORD, type TestApp, forEachEngine, makeApp, until } from '../../test/helpers'
import { auditStore } from './store'

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  const list = async (q = '') => {
    const r = await a.req('GET', `/api/v1/audit${q}`, { token: admin })
    expect(r.status).toBe(200)
    return r.body.data
  }

  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: { audit: { sensitive_fields: ['password', 'pin_code'] } },
      config: { server: { trust_forwarded_for: true } },
    })
    admin = await a.token('admin')
  })
  afterAll(() => a.stop())

  describe('audit log', () => {
    test('an entry whose text holds a NUL is kept, the NUL shown as U+FFFD (PostgreSQL cannot store it)', async () => {
      await auditStore(a.db, () => []).record({
        actor_kind: 'user',
        actor_id: 'i\u0000d',
        actor_name: 'x\u0000y',
        action: 'test.nul',
        target: 't\u0000',
        ip: '10.0.0.\u00001',
      })
      const [e] = (await list('?action=test.nul')).items
      expect(e).toMatchObject({
        target: 't\uFFFD',
        ip: '10.0.0.\uFFFD1',
        actor: { name: 'x\uFFFDy', id: 'i\uFFFDd' },
      })
    })

    test('logins are recorded with who, when and from where; refused ones with ok=false', async () => {
      const ok = await a.req('POST', '/api/auth/login', {
        body: { email: 'admin@localhost', password: ADMIN_PASSWORD },
        headers: { 'x-forwarded-for': '10.0.0.1, 203.0.113.77' },
      })
      expect(ok.status).toBe(200)
      const bad = await a.req('POST', '/api/v1/auth/login', {
        body: { username: 'admin', password: 'not-the-password' },
        headers: { 'x-forwarded-for': '198.51.100.9' },
      })
      expect(bad.status).toBe(401)
      await until(async () => (await list('?action=auth.login')).total === 2)
      const [refused, accepted] = (await list('?action=auth.login')).items
      expect(accepted).toMatchObject({
        action: 'auth.login',
        ok: true,
        ip: '203.0.113.77',
        actor: { kind: 'user', name: 'admin' },
        target: 'admin@localhost',
      })
      expect(Date.parse(accepted.at)).toBeGreaterThan(Date.now() - 60_000)
      expect(refused).toMatchObject({
        ok: false,
        ip: '198.51.100.9',
        details: { reason: 'invalid credentials' },
      })
      expect(JSON.stringify(refused)).not.toContain('not-the-password')
      expect((await list('?ok=false')).items.map((e: { ip: string }) => e.ip)).toEqual(['198.51.100.9'])
      expect((await list('?ip=203.0.113.77')).total).toBe(1)
    })

    test("a locked login's refusals are no entries, a login name is at most 191 characters, a kept text 512", async () => {
      // One address's 1,869 refused attempts in 10 s were 1,869 rows, each with its 60 KB name.
      const ip = { 'x-forwarded-for': '198.51.100.77' }
      const statuses: number[] = []
      for (let i = 0; i < 9; i++)
        statuses.push(
          (
            await a.req('POST', '/api/auth/login', {
              body: { email: 'flood@example.org', password: `guess-${i}` },
              headers: ip,
            })
          ).status,
        )
      expect(statuses).toContain(429)
      const checked = statuses.filter((s) => s === 401).length
      await until(async () => (await list('?ip=198.51.100.77')).total === checked)
      await Bun.sleep(100)
      expect((await list('?ip=198.51.100.77')).total).toBe(checked)
      const long = await a.req('POST', '/api/auth/login', {
        body: { email: `${'x'.repeat(192)}@e.org`, password: 'p' },
      })
      expect([long.status, long.body.details?.field]).toEqual([400, 'body.email'])
      await a.bus.emit('audit', {
        actor_kind: 'user',
        actor_name: 'n'.repeat(5_000),
        action: 'wide.entry',
        target: 't'.repeat(5_000),
      })
      await until(async () => (await list('?action=wide.entry')).total === 1)
      const [wide] = (await list('?action=wide.entry')).items
      expect([wide.actor.name.length, wide.target.length]).toEqual([512, 512])
    })

    test('details are masked by the sensitive_fields setting; filters by area, actor and time; paging', async () => {
      for (let i = 0; i < 3; i++)
        await a.bus.emit('audit', {
          actor_kind: 'user',
          actor_id: 'u-17',
          actor_name: 'marta',
          action: 'vault.put',
          target: `door-${i}`,
          details: { pin_code: `4711-0815-${i}`, smtpPassword: 'correct-horse-battery', note: 'kept' },
        })
      const all = await list('?action=vault')
      expect(all.total).toBe(3)
      const e = all.items[0]
      expect(e.target).toBe('door-2')
      expect(e.details).toEqual({ pin_code: 'set', smtpPassword: 'set', note: 'kept' })
      const page2 = await list('?action=vault&size=2&page=2')
      expect(page2).toMatchObject({ total: 3, page: 2, size: 2 })
      expect(page2.items.map((x: { target: string }) => x.target)).toEqual(['door-0'])
      expect((await list('?actor=marta')).total).toBe(3)
      expect((await list('?actor=u-17&target=door-1')).total).toBe(1)
      const future = new Date(Date.now() + 3_600_000).toISOString()
      expect((await list(`?action=vault&from=${future}`)).total).toBe(0)
      expect((await list(`?action=vault&to=${future}`)).total).toBe(3)
    })

    test('operators may read; viewers 403; no token 401; bad queries 400 naming the field', async () => {
      expect((await a.req('GET', '/api/v1/audit')).status).toBe(401)
      expect((await a.req('GET', '/api/v1/audit', { token: await a.token('viewer') })).status).toBe(403)
      expect((await a.req('GET', '/api/v1/audit', { token: await a.token('operator') })).status).toBe(200)
      const bad = await a.req('GET', '/api/v1/audit?from=yesterday', { token: admin })
      expect(bad.status).toBe(400)
      expect(bad.body.message).toContain('query.from')
      expect((await a.req('GET', '/api/v1/audit?size=0', { token: admin })).status).toBe(400)
      expect((await a.req('GET', '/api/v1/audit/nothing-here', { token: admin })).status).toBe(404)
    })
  })
})

test('a write without an entry of its own is recorded from its route: who, a readable action and target, status, where', async () => {
  const a = await makeApp('sqlite', { config: { server: { trust_forwarded_for: true } } })
  try {
    const admin = await a.token('admin')
    const put = await a.req('PUT', '/api/v1/rules/lag', {
      token: admin,
      body: { match: 'type == "db.lag"', mode: 'active' },
      headers: { 'x-forwarded-for': '192.0.2.44' },
    })
    expect(put.status).toBe(404)
    const made = await a.req('POST', '/api/v1/rules', {
      token: admin,
      body: { id: 'lag', match: 'type == "db.lag"', mode: 'active' },
      headers: { 'x-forwarded-for': '192.0.2.44' },
    })
    expect(made.status).toBe(200)
    const denied = await a.req('DELETE', '/api/v1/rules/lag', { token: await a.token('viewer') })
    expect(denied.status).toBe(403)
    await a.req('GET', '/api/v1/rules/lag', { token: admin })
    const list = async () => (await a.req('GET', '/api/v1/audit?action=rule', { token: admin })).body.data
    await until(async () => (await list()).total >= 3)
    const [refused, created, missing] = (await list()).items
    expect(created).toMatchObject({
      action: 'rule.create',
      target: 'rule:lag',
      ip: '192.0.2.44',
      ok: true,
      actor: { kind: 'user', name: 'admin-user' },
      details: { status: 200, body: { id: 'lag', match: 'type == "db.lag"', mode: 'active' } },
    })
    expect(missing).toMatchObject({
      action: 'rule.update',
      target: 'rule:lag',
      ok: false,
      details: { status: 404 },
    })
    expect(refused).toMatchObject({
      action: 'rule.delete',
      ok: false,
      details: { status: 403 },
      actor: { kind: 'user', name: 'viewer-user' },
    })
    // Reads are not recorded.
    expect(
      (await a.req('GET', '/api/v1/audit?size=500', { token: admin })).body.data.items.some(
        (e: { action: string }) => e.action.endsWith('.get'),
      ),
    ).toBe(false)
  } finally {
    await a.stop()
  }
})

forEachEngine((engine) => {
  test('a write answered just before the app stops still reaches the audit log before the store closes', async () => {
    const b = await makeApp(engine, { plugins: { audit: {}, games: {} } })
    const stored: string[] = []
    const errors: string[] = []
    // Beside the audit plugin's own listener: one that reads the store after it, to see that
    // stopping waits for both.
    b.bus.on('http.write', async (w) => {
      try {
        // Waits (up to 3 s) for the audit plugin's own listener to store the entry: the store
        // must stay open for both while the app stops.
        let n = 0
        for (let i = 0; i < 60 && n === 0; i++) {
          if (i) await Bun.sleep(50)
          const row = await b.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM audit_log WHERE action = ?', [
            'game.create',
          ])
          n = Number(row?.n)
        }
        stored.push(`${w.route} ${n}`)
      } catch (e) {
        errors.push(String(e))
      }
    })
    const r = await b.req('POST', '/api/games', {
      token: await b.token('admin'),
      body: {
        name: 'Last Write',
        genre: 'PUZZLE',
        platforms: ['WEB'],
        timezone: 'UTC',
        defaultCurrency: 'USD',
      },
    })
    expect(r.status, JSON.stringify(r.body)).toBe(201)
    await b.stop()
    expect(errors).toEqual([])
    expect(stored).toEqual(['/api/games 1'])
  })
})

import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp } from '../../../test/helpers'
import { SECRET, game, signed } from '../testing'
import { mask } from './privacy'

describe('masking', () => {
  test('emails keep the first letter and domain, phones the last 4 digits, IPs lose the host', () => {
    expect(mask('email', 'jane.doe@example.com')).toBe('j***@example.com')
    expect(mask('phone', '+49 170 1234567')).toBe('***4567')
    expect(mask('ip', '203.0.113.42')).toBe('203.0.113.0')
    expect(mask('ip', '2001:db8:85a3:8d3:1319:8a2e:370:7348')).toBe('2001:db8:85a3::')
    expect(mask('email', 'not-an-email')).toBe('***')
  })
})

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  const stored = async (event: string) => {
    const row = await a.db.get<{ props: string }>(
      'SELECT props FROM ingest_events WHERE game_id = ? AND event = ?',
      [gameId, event],
    )
    return row ? (JSON.parse(row.props) as Record<string, unknown>) : undefined
  }
  const ev = (event: string, extra: Record<string, unknown>) => ({
    event,
    ts: String(Date.now()),
    game_id: gameId,
    env: 'prod',
    uid: 'u1',
    ...extra,
  })

  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: { games: {}, ingest: { signing_secret: SECRET, purge_interval_minutes: 0 }, analytics: {} },
    })
    admin = await a.token('admin')
    gameId = (await a.req('POST', '/api/games', { token: admin, body: game })).body.id
  })
  afterAll(() => a.stop())

  const policy = (settings: Record<string, unknown>) =>
    a.req('PUT', `/api/games/${gameId}/environments/prod/settings`, { token: admin, body: settings })

  test('the default policy masks email and phone and drops ip, at top level and in attrs', async () => {
    const r = await signed(a, '/api/ingest/events', [
      ev('signup', {
        email: 'jane.doe@example.com',
        attrs: { phone: '+1 555 0100 1234', ip: '198.51.100.7', plan: 'gold' },
      }),
    ])
    expect(r.status).toBe(200)
    const props = await stored('signup')
    expect(props?.email).toBe('j***@example.com')
    expect(props?.attrs).toEqual({ phone: '***1234', plan: 'gold' })
    expect(JSON.stringify(props)).not.toContain('jane.doe')
  })

  test("the policy reaches nested objects, arrays of them and OpenTelemetry's names (user.email, client.address)", async () => {
    const r = await signed(a, '/api/ingest/events', [
      ev('profile_saved', {
        profile: { email: 'nested@example.com', phone: '+1 555 000 1111', ip: '203.0.113.9', tier: 'vip' },
        contacts: [{ mail: 'friend@example.com' }, 'plain text'],
        'user.email': 'dotted@example.com',
        'client.address': '203.0.113.7',
      }),
    ])
    expect(r.status).toBe(200)
    const props = await stored('profile_saved')
    expect(props).toMatchObject({
      profile: { email: 'n***@example.com', phone: '***1111', tier: 'vip' },
      contacts: [{ mail: 'f***@example.com' }, 'plain text'],
      'user.email': 'd***@example.com',
    })
    expect((props?.profile as Record<string, unknown>).ip).toBeUndefined()
    expect(props?.['client.address']).toBeUndefined()
    expect(JSON.stringify(props)).not.toMatch(/nested@|friend@|dotted@|203\.0\.113\.[79]/)
    // Deny names the nested field.
    expect((await policy({ pii: { email: 'deny' } })).status).toBe(200)
    const denied = await signed(a, '/api/ingest/events', [
      ev('deep', { a: { b: [{ 'user.email': 'x@y.io' }] } }),
    ])
    expect(denied.body.details?.errors).toEqual([
      {
        index: 0,
        field: 'a.b[0].user.email',
        reason: "personal data (email) is denied in environment 'prod'",
      },
    ])
    expect((await policy({ pii: { email: 'mask' } })).status).toBe(200)
  })

  test('deny refuses the whole signed batch naming the event and field; /v1/batch rejects just that item', async () => {
    expect((await policy({ pii: { email: 'deny' } })).status).toBe(200)
    const r = await signed(a, '/api/ingest/events', [
      ev('ok_one', {}),
      ev('leaky', { attrs: { email: 'x@y.io' } }),
    ])
    expect(r.status).toBe(400)
    expect(r.body.error).toBe('pii_denied')
    expect(r.body.details.errors).toEqual([
      { index: 1, field: 'attrs.email', reason: "personal data (email) is denied in environment 'prod'" },
    ])
    expect(await stored('ok_one')).toBeUndefined()

    const key = (
      await a.req('POST', '/api/api-keys', { token: admin, body: { name: 'k', gameId, environment: 'prod' } })
    ).body.key
    const batch = await a.req('POST', '/v1/batch', {
      headers: { 'x-api-key': key },
      body: [
        { event_id: 'a', event_name: 'fine', user_id: 'u2' },
        { event_id: 'b', event_name: 'leaky', user_id: 'u2', email: 'x@y.io' },
      ],
    })
    expect(batch.status).toBe(200)
    expect(batch.body.accepted).toEqual(['a'])
    expect(batch.body.rejected).toEqual([
      { event_id: 'b', reason: "email: personal data (email) is denied in environment 'prod'" },
    ])
    const server = await a.req('POST', '/api/v1/analytics/ingest', {
      token: admin,
      body: [ev('leaky', { email: 'x@y.io' })],
    })
    expect(server.status).toBe(400)
    expect(server.body.error).toBe('pii_denied')
    expect(await policy({ pii: { email: 'mask' } })).toMatchObject({ status: 200 })
  })

  test('allow keeps personal data; the allow-list keeps only listed properties and the fields the service reads', async () => {
    await policy({ pii: { email: 'allow', phone: 'allow', ip: 'allow' }, propertyAllowList: ['level_name'] })
    const r = await signed(a, '/api/ingest/events', [
      ev('level_up', {
        email: 'jane@example.com',
        level_name: 'forest',
        secret_note: 'x',
        attrs: { exp: 'e1', variant: 'a', colour: 'red' },
      }),
    ])
    expect(r.status).toBe(200)
    const props = await stored('level_up')
    expect(props).toMatchObject({ level_name: 'forest', attrs: { exp: 'e1', variant: 'a' } })
    expect(props?.secret_note).toBeUndefined()
    expect(props?.email).toBeUndefined()
    expect((props?.attrs as Record<string, unknown>).colour).toBeUndefined()
    await policy({ propertyAllowList: [] })
    await signed(a, '/api/ingest/events', [ev('contact', { email: 'jane@example.com' })])
    expect((await stored('contact'))?.email).toBe('jane@example.com')
  })
})

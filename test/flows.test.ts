import { afterAll, beforeAll, expect, test } from 'bun:test'
import { Experiments, LiveopsClient } from '../sdk'
import { type TestApp, forEachEngine, makeApp } from './helpers'

const SECRET = 'flow-signing-secret'

/**
 * A studio's first day, across plugins, through the real app and the SDK: register a game, issue
 * an SDK key, run an experiment, send events and payments, read the warehouse and the experiment
 * results, and notify the team.
 */
forEachEngine((engine) => {
  let a: TestApp
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        games: {},
        ingest: { signing_secret: SECRET, purge_interval_minutes: 0 },
        analytics: {},
        experiments: {},
        'webhook-provider': {},
        'smtp-provider': {},
        notify: { auth: { enabled: true }, channels: { audit: { type: 'log' } } },
      },
    })
  })
  afterAll(() => a.stop())

  test('game -> API key -> experiment -> SDK events -> DAU, revenue, results -> notification', async () => {
    const admin = await a.token('admin')
    const fetchApp = (input: string, init: RequestInit) => a.app.handle(new Request(input, init))

    const game = await a.req('POST', '/api/games', {
      token: admin,
      body: {
        name: 'Flow Quest',
        genre: 'CASUAL',
        platforms: ['IOS'],
        timezone: 'UTC',
        defaultCurrency: 'USD',
      },
    })
    expect(game.status).toBe(201)
    const gameId = game.body.id as string
    const key = await a.req('POST', '/api/api-keys', {
      token: await a.token('developer'),
      body: { name: 'ios', gameId, environment: 'prod' },
    })
    expect(key.status).toBe(201)

    const exp = await a.req('POST', '/api/experiments', {
      token: await a.token('operator'),
      body: {
        gameId,
        environment: 'prod',
        name: 'shop layout',
        salt: 'flow',
        config: {
          variants: [
            { name: 'control', weight: 50 },
            { name: 'grid', weight: 50 },
          ],
          metrics: { primary: 'purchase', secondary: [] },
        },
      },
    })
    expect(exp.status).toBe(201)
    expect(
      (await a.req('POST', `/api/experiments/${exp.body.id}/publish`, { token: admin })).body.status,
    ).toBe('running')
    const config = await a.app.handle(new Request(`http://localhost/api/config/${gameId}/prod`))
    expect(config.status).toBe(200)
    const running = (await config.json()) as Array<{
      id: string
      salt: string
      config: { variants: Array<{ name: string; weight: number }> }
    }>
    expect(running.map((e) => e.id)).toEqual([exp.body.id])

    // Twenty players log in through the API-key SDK; they are exposed, and every third buys.
    const t0 = Date.now() - 60_000
    const buyers = new Set<string>()
    const assigned = new Map<string, string>()
    for (let i = 0; i < 20; i++) {
      const uid = `player-${i}`
      const client = new LiveopsClient({
        endpoint: 'http://localhost',
        gameId,
        env: 'prod',
        apiKey: key.body.key,
        fetch: fetchApp,
        flushIntervalMs: 0,
        flushOnExit: false,
      })
      client.identify(uid)
      client.track('login', {}, t0 + i)
      const experiments = new Experiments({
        gameId,
        environment: 'prod',
        track: (e) => client.track(e.event, e.attrs, Number(e.ts)),
        now: () => t0 + 100 + i,
      })
      assigned.set(
        uid,
        experiments.assign({ id: running[0].id, salt: running[0].salt, config: running[0].config }, uid) ??
          '',
      )
      if (i % 3 === 0) {
        client.track('purchase', { sku: 'gems' }, t0 + 1000 + i)
        buyers.add(uid)
      }
      await client.close()
    }

    // Payments go through the signed SDK.
    const signed = new LiveopsClient({
      endpoint: 'http://localhost',
      gameId,
      env: 'prod',
      secret: SECRET,
      fetch: fetchApp,
      flushIntervalMs: 0,
      flushOnExit: false,
    })
    signed.identify('player-0')
    signed.payment({ orderId: 'o-1', status: 'success', amountCents: 499, currency: 'USD' }, t0)
    signed.payment({ orderId: 'o-1', status: 'success', amountCents: 499, currency: 'USD' }, t0)
    signed.payment({ orderId: 'o-2', status: 'success', amountCents: 999, currency: 'USD' }, t0)
    await signed.close()

    const analyst = await a.token('analyst')
    // Two days, and the point of t0's own (UTC) day: a run just after midnight sent its events yesterday.
    const day = new Date(t0).toISOString().slice(0, 10)
    const dau = await a.req('GET', `/api/v1/analytics/warehouse/dau?gameId=${gameId}&env=prod&days=2`, {
      token: analyst,
    })
    expect(dau.status).toBe(200)
    const today = dau.body.points.find((p: { date: string }) => p.date === day)
    expect(today).toMatchObject({ gameId, env: 'prod', dau: 20 })
    const revenue = await a.req(
      'GET',
      `/api/v1/analytics/warehouse/revenue?gameId=${gameId}&env=prod&days=2`,
      { token: analyst },
    )
    expect(revenue.body.points.find((p: { date: string }) => p.date === day)).toMatchObject({
      revenueCents: 1498,
      refundsCents: 0,
      failed: 0,
    })

    const results = await a.req('GET', `/api/experiments/${exp.body.id}/results`, { token: analyst })
    expect(results.status).toBe(200)
    const expected = new Map([
      ['control', { exposures: 0, conversions: 0 }],
      ['grid', { exposures: 0, conversions: 0 }],
    ])
    for (const [uid, variant] of assigned) {
      const counts = expected.get(variant)!
      counts.exposures++
      if (buyers.has(uid)) counts.conversions++
    }
    expect(results.body.totalExposures).toBe(20)
    expect(results.body.primary.metric).toBe('purchase')
    const seen = (
      results.body.primary.variants as Array<{ name: string; exposures: number; conversions: number }>
    ).map((v) => [v.name, { exposures: v.exposures, conversions: v.conversions }])
    expect(seen).toEqual([...expected])

    // The team hears about it; the delivery shows up in the logs.
    const sent = await a.req('POST', '/api/v1/notify', {
      token: await a.token('operator'),
      body: { type: 'game.launch', level: 'info', channel: 'audit', title: 'Flow Quest', body: 'live' },
    })
    expect(sent.body).toMatchObject({ code: 0, data: { accepted: ['audit'] } })
    let status = 'pending'
    for (let i = 0; i < 100 && status === 'pending'; i++) {
      await Bun.sleep(20)
      const logs = await a.req('GET', '/api/v1/logs?provider=audit', { token: admin })
      status = logs.body.data.logs[0]?.status ?? 'pending'
    }
    expect(status).toBe('success')
  })
})

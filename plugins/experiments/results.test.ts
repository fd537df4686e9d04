import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHmac } from 'node:crypto'
import { Experiments, type ExposureEvent } from '../../sdk/assign'
import { type TestApp, forEachEngine, makeApp } from '../../test/helpers'
import { compare, srm } from './stats'

const SECRET = 'experiments-test-signing-secret'
const GAME = {
  name: 'Results Game',
  genre: 'RPG',
  platforms: ['ANDROID'],
  timezone: 'UTC',
  defaultCurrency: 'USD',
}

/** Spec 1 section 5 rule 4, written out here so the test does not borrow the server's code. */
function signed(body: string): Record<string, string> {
  const ts = String(Math.floor(Date.now() / 1000))
  const nonce = crypto.randomUUID()
  const digest = new Bun.CryptoHasher('sha256').update(body).digest('hex')
  const signature = createHmac('sha256', SECRET).update(`${ts}\n${nonce}\n${digest}`).digest('base64')
  return { 'content-type': 'application/json', 'x-timestamp': ts, 'x-nonce': nonce, 'x-signature': signature }
}

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  beforeAll(async () => {
    a = await makeApp(engine, { plugins: { games: {}, ingest: { signing_secret: SECRET }, experiments: {} } })
    admin = await a.token('admin')
    gameId = (await a.req('POST', '/api/games', { token: admin, body: GAME })).body.id
  })
  afterAll(() => a.stop())

  const ingest = async (events: unknown[]) => {
    const raw = JSON.stringify(events)
    const r = await a.req('POST', '/api/ingest/events', { raw, headers: signed(raw) })
    expect(r.status).toBe(200)
  }

  describe('results', () => {
    test('exposures from the SDK, conversions after exposure, statistics against the first variant, SRM', async () => {
      const created = await a.req('POST', '/api/experiments', {
        token: admin,
        body: {
          gameId,
          environment: 'prod',
          name: 'checkout button',
          config: {
            variants: [
              { name: 'A', weight: 50 },
              { name: 'B', weight: 50 },
            ],
            metrics: { primary: 'purchase', secondary: ['level_up'] },
          },
        },
      })
      const e = created.body
      await a.req('POST', `/api/experiments/${e.id}/publish`, { token: admin })
      const exp = (await a.req('GET', `/api/config/${gameId}/prod`)).body[0]

      const t0 = Date.now() - 60_000
      const sent: ExposureEvent[] = []
      const sdk = new Experiments({
        gameId,
        environment: 'prod',
        track: (ev) => sent.push(ev),
        now: () => t0,
      })
      const events: Array<Record<string, unknown>> = []
      const expected: Record<string, { n: number; purchase: number; level: number }> = {
        A: { n: 0, purchase: 0, level: 0 },
        B: { n: 0, purchase: 0, level: 0 },
      }
      for (let i = 0; i < 120; i++) {
        const uid = `user-${i}`
        const variant = sdk.assign(exp, uid)!
        sdk.assign(exp, uid) // a second screen: no second exposure
        expected[variant].n++
        // B buys more often; some users level up only before their exposure, which does not count.
        if (i % (variant === 'B' ? 2 : 4) === 0) {
          events.push({ event: 'purchase', ts: String(t0 + 5_000), uid, game_id: gameId, env: 'prod' })
          expected[variant].purchase++
        }
        if (i % 3 === 0)
          events.push({ event: 'level_up', ts: String(t0 - 5_000), uid, game_id: gameId, env: 'prod' })
        if (i % 5 === 0) {
          events.push({ event: 'level_up', ts: String(t0 + 1_000), uid, game_id: gameId, env: 'prod' })
          expected[variant].level++
        }
      }
      // A purchase by a user never exposed is no conversion.
      events.push({
        event: 'purchase',
        ts: String(t0 + 5_000),
        uid: 'stranger',
        game_id: gameId,
        env: 'prod',
      })
      expect(sent).toHaveLength(120)
      await ingest([...sent, ...events])

      const r = await a.req('GET', `/api/experiments/${e.id}/results`, { token: await a.token('analyst') })
      expect(r.status).toBe(200)
      const { A, B } = expected
      expect(r.body).toMatchObject({
        experimentId: e.id,
        status: 'running',
        control: 'A',
        totalExposures: 120,
        unexpectedVariants: [],
      })
      expect(r.body.exposures).toEqual([
        { name: 'A', weight: 50, exposures: A.n, share: A.n / 120 },
        { name: 'B', weight: 50, exposures: B.n, share: B.n / 120 },
      ])
      expect(r.body.primary.metric).toBe('purchase')
      expect(r.body.primary.variants).toEqual([
        {
          name: 'A',
          exposures: A.n,
          conversions: A.purchase,
          conversionRate: A.purchase / A.n,
          vsControl: null,
        },
        {
          name: 'B',
          exposures: B.n,
          conversions: B.purchase,
          conversionRate: B.purchase / B.n,
          vsControl: compare({ n: A.n, x: A.purchase }, { n: B.n, x: B.purchase }),
        },
      ])
      expect(r.body.secondary).toHaveLength(1)
      expect(r.body.secondary[0].variants.map((v: { conversions: number }) => v.conversions)).toEqual([
        A.level,
        B.level,
      ])
      expect(r.body.srm).toEqual(srm([A.n, B.n], [50, 50]))
    })

    test('an experiment without events answers zeros, and exposures naming unknown variants are listed apart', async () => {
      const e = (
        await a.req('POST', '/api/experiments', {
          token: admin,
          body: {
            gameId,
            environment: 'dev',
            name: 'quiet',
            config: {
              variants: [
                { name: 'x', weight: 50 },
                { name: 'y', weight: 50 },
              ],
              metrics: { primary: 'purchase' },
            },
          },
        })
      ).body
      const empty = await a.req('GET', `/api/experiments/${e.id}/results`, { token: admin })
      expect(empty.status).toBe(200)
      expect(empty.body).toMatchObject({
        status: 'draft',
        totalExposures: 0,
        srm: { pValue: null, mismatch: false },
      })
      expect(empty.body.primary.variants[1].vsControl).toBeNull()
      // Exposures count for an experiment clients could see: running (or paused since), not a draft.
      expect((await a.req('POST', `/api/experiments/${e.id}/publish`, { token: admin })).status).toBe(200)
      await ingest([
        {
          event: 'experiment_exposure',
          ts: String(Date.now()),
          uid: 'u',
          game_id: gameId,
          env: 'dev',
          attrs: { exp: e.id, variant: 'z' },
        },
      ])
      const r = await a.req('GET', `/api/experiments/${e.id}/results`, { token: admin })
      expect(r.body.unexpectedVariants).toEqual([{ name: 'z', exposures: 1 }])
      expect(r.body.totalExposures).toBe(0)
    })
  })
})

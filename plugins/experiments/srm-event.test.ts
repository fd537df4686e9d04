import { afterAll, beforeAll, expect, test } from 'bun:test'
import { signRequest } from '../../sdk/sign'
import { type TestApp, forEachEngine, makeApp, until } from '../../test/helpers'
import { httpSink } from '../notify/testing'

/**
 * Issue 36 point 4: `experiment_srm` is raised when a running experiment's sample-ratio check
 * fails (it was subscribed to but never emitted), and reaches the channels as one notification.
 */
const SECRET = 'srm-event-signing-secret'

forEachEngine((engine) => {
  const hook = httpSink()
  let a: TestApp
  let admin: string
  let gameId: string
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        games: {},
        ingest: { signing_secret: SECRET, purge_interval_minutes: 0 },
        experiments: {},
        'webhook-provider': {},
        notify: {
          channels: { hook: { type: 'webhook', url: hook.url } },
          routes: [{ type: 'experiment_srm', channels: ['hook'] }],
        },
      },
    })
    admin = await a.token('admin')
    gameId = (
      await a.req('POST', '/api/games', {
        token: admin,
        body: {
          name: 'SRM Game',
          genre: 'RPG',
          platforms: ['ANDROID'],
          timezone: 'UTC',
          defaultCurrency: 'USD',
        },
      })
    ).body.id
  })
  afterAll(async () => {
    await a.stop()
    hook.stop()
  })

  const experiment = async (name: string) => {
    const e = (
      await a.req('POST', '/api/experiments', {
        token: admin,
        body: {
          gameId,
          environment: 'prod',
          name,
          config: {
            variants: [
              { name: 'A', weight: 50 },
              { name: 'B', weight: 50 },
            ],
          },
        },
      })
    ).body
    expect((await a.req('POST', `/api/experiments/${e.id}/publish`, { token: admin })).status).toBe(200)
    return e.id as string
  }
  /** Exposures split `a` to `b` between the two variants. */
  const expose = async (exp: string, a_: number, b: number) => {
    const ts = String(Date.now() - 60_000)
    const events = Array.from({ length: a_ + b }, (_, i) => ({
      event: 'experiment_exposure',
      ts,
      uid: `${exp}-u${i}`,
      game_id: gameId,
      env: 'prod',
      attrs: { exp, variant: i < a_ ? 'A' : 'B' },
    }))
    const raw = JSON.stringify(events)
    const r = await a.req('POST', '/api/ingest/events', {
      raw,
      headers: { 'content-type': 'application/json', ...(await signRequest(SECRET, raw)) },
    })
    expect(r.status).toBe(200)
  }
  const results = async (id: string) => {
    const r = await a.req('GET', `/api/experiments/${id}/results`, { token: admin })
    expect(r.status).toBe(200)
    return r.body
  }
  const notified = (id: string) => hook.hits.filter((h) => JSON.stringify(h.body).includes(id))

  test('a running experiment failing its SRM check raises experiment_srm once a day; a balanced one does not', async () => {
    const skewed = await experiment('skewed split')
    await expose(skewed, 300, 100)
    expect((await results(skewed)).srm.mismatch).toBe(true)
    await until(() => notified(skewed).length > 0)
    expect(notified(skewed)[0]!.body).toMatchObject({ title: `Experiment ${skewed}: sample ratio mismatch` })
    // Read again: the same day's notification is not sent twice.
    await results(skewed)

    const balanced = await experiment('balanced split')
    await expose(balanced, 200, 200)
    expect((await results(balanced)).srm.mismatch).toBe(false)
    // Wait for the queue to empty: every notification there is has been delivered.
    await until(async () => (await a.req('GET', '/api/v1/queue', { token: admin })).body.data.size === 0)
    expect(notified(balanced)).toHaveLength(0)
    expect(notified(skewed)).toHaveLength(1)
  })
})

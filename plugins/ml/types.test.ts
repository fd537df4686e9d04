import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine } from '../../test/helpers'
import { rng } from './algorithms/data'
import { ingest, mlApp, newGame, newModel, uploadCsv, waitJob } from './testing'

const DAY = 86_400_000

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  beforeAll(async () => {
    a = await mlApp(engine)
    admin = await a.token('admin')
    gameId = await newGame(a, admin)
  })
  afterAll(() => a.stop())

  /** Trains on `csv` (or events), deploys and returns a predict function. */
  async function ready(
    type: string,
    datasetConfig: Record<string, unknown>,
    csv?: string,
    hyperparameters?: Record<string, number>,
  ) {
    const m = await newModel(a, admin, { gameId, type })
    const query = csv ? await uploadCsv(a, admin, m.id, csv) : datasetConfig.query
    const r = await a.req('POST', `/api/ml-models/${m.id}/train`, {
      token: admin,
      body: { datasetConfig: { ...datasetConfig, query }, ...(hyperparameters ? { hyperparameters } : {}) },
    })
    expect(r.status).toBe(202)
    const job = await waitJob(a, admin, m.id, r.body.id)
    expect(job.status).toBe('completed')
    expect((await a.req('POST', `/api/ml-models/${m.id}/deploy`, { token: admin, body: {} })).status).toBe(
      200,
    )
    return {
      job,
      predict: async (features: Record<string, number>) =>
        (await a.req('POST', `/api/ml-models/${m.id}/predict`, { token: admin, body: { features } })).body,
    }
  }

  describe('ml model types through the API', () => {
    test('CLUSTERING (k-means): players of three styles land in three clusters', async () => {
      const r = rng(12)
      const styles = [
        [2, 50],
        [30, 5],
        [15, 25],
      ]
      const lines = ['pvp_matches,quests']
      for (let i = 0; i < 600; i++) {
        const s = styles[i % 3]
        lines.push(`${s[0] + r() * 2},${s[1] + r() * 2}`)
      }
      const { job, predict } = await ready(
        'CLUSTERING',
        { source: 'csv', features: ['pvp_matches', 'quests'] },
        lines.join('\n'),
        { k: 3 },
      )
      expect(job.metrics.silhouette).toBeGreaterThan(0.8)
      const c = await Promise.all(styles.map(([p, q]) => predict({ pvp_matches: p + 1, quests: q + 1 })))
      expect(new Set(c.map((x) => x.prediction)).size).toBe(3)
      expect(c.every((x) => x.probability > 0.9)).toBe(true)
      expect((await predict({ pvp_matches: 2.5, quests: 50.5 })).prediction).toBe(c[0].prediction)
    })

    test('ANOMALY_DETECTION (robust z-score): a bot-like session is flagged, a normal one is not', async () => {
      const r = rng(13)
      const lines = ['actions_per_min,session_min']
      for (let i = 0; i < 500; i++) lines.push(`${40 + r() * 20},${20 + r() * 30}`)
      for (let i = 0; i < 5; i++) lines.push(`${400 + i},${600}`)
      const { job, predict } = await ready(
        'ANOMALY_DETECTION',
        { source: 'csv', features: ['actions_per_min', 'session_min'] },
        lines.join('\n'),
      )
      expect(job.metrics.anomalyRate).toBeLessThan(0.05)
      const bot = await predict({ actions_per_min: 450, session_min: 700 })
      expect(bot.prediction).toBe('anomaly')
      expect(bot.probability).toBeGreaterThan(0.9)
      expect(bot.value).toBeGreaterThan(3.5)
      const human = await predict({ actions_per_min: 50, session_min: 35 })
      expect(human.prediction).toBe('normal')
      expect(human.confidence).toBeGreaterThan(0.9)
    })

    test('TIME_SERIES from events: daily counts of an event, forecast a day ahead', async () => {
      const g = await newGame(a, admin)
      const week = [30, 35, 40, 38, 45, 80, 90]
      const start = Math.floor(Date.now() / DAY) * DAY - 42 * DAY
      const events: Array<Record<string, unknown>> = []
      for (let d = 0; d < 42; d++)
        for (let i = 0; i < week[d % 7]; i++)
          events.push({
            event: 'match_start',
            ts: String(start + d * DAY + i * 1000),
            game_id: g,
            env: 'prod',
            user_id: `u${i}`,
          })
      await ingest(a, events)
      const m = await newModel(a, admin, { gameId: g, type: 'TIME_SERIES' })
      const r = await a.req('POST', `/api/ml-models/${m.id}/train`, {
        token: admin,
        body: {
          datasetConfig: {
            source: 'events',
            query: `event=match_start&from=${start}&to=${start + 42 * DAY - 1}&interval=day`,
            features: [],
          },
          hyperparameters: { seasonLength: 7 },
        },
      })
      const job = await waitJob(a, admin, m.id, r.body.id)
      expect(job.status).toBe('completed')
      expect(job.rowsUsed).toBe(42)
      expect(job.metrics.mape).toBeLessThan(0.05)
      await a.req('POST', `/api/ml-models/${m.id}/deploy`, { token: admin, body: {} })
      const f = await a.req('POST', `/api/ml-models/${m.id}/predict`, {
        token: admin,
        body: { features: { horizon: 1 } },
      })
      // Day 42 is a week[0] day.
      expect(f.body.value).toBeGreaterThan(25)
      expect(f.body.value).toBeLessThan(35)
    })
  })
})

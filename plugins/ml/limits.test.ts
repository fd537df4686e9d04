import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, until } from '../../test/helpers'
import { purgePredictions } from './log'
import { churnCsv, mlApp, newGame, newModel, trainedClassifier, waitJob } from './testing'

const DAY = 86_400_000

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  beforeAll(async () => {
    a = await mlApp(engine, { max_csv_mb: 0.01, flush_ms: 5 })
    admin = await a.token('admin')
    gameId = await newGame(a, admin)
  })
  afterAll(() => a.stop())

  describe('ml limits and retention', () => {
    test('a CSV over max_csv_mb answers 413; one that is not CSV, 400; nothing is stored', async () => {
      const m = await newModel(a, admin, { gameId, type: 'CLASSIFICATION' })
      const up = (raw: string) =>
        a.req('POST', `/api/ml-models/${m.id}/datasets`, {
          token: admin,
          raw,
          headers: { 'content-type': 'text/csv' },
        })
      const big = await up(churnCsv(2000, 1))
      expect(big.status).toBe(413)
      expect(big.body.error).toBe('body_too_large')
      expect((await up('only_a_header\n')).status).toBe(400)
      expect((await up('a,a\n1,2\n')).body.message).toContain('unique')
      expect((await up('a,b\n1,"unterminated\n')).status).toBe(400)
      expect((await a.req('POST', `/api/ml-models/${m.id}/datasets`, { raw: 'a\n1\n' })).status).toBe(401)
      expect(
        (
          await a.req('POST', `/api/ml-models/${m.id}/datasets`, {
            token: await a.token('viewer'),
            raw: 'a\n1\n',
          })
        ).status,
      ).toBe(403)
      expect((await a.req('GET', `/api/ml-models/${m.id}/datasets`, { token: admin })).body).toEqual([])
      const ok = await up('level,won\n3,1\n4,0\n')
      expect(ok.status).toBe(201)
      expect(ok.body).toMatchObject({ modelId: m.id, columns: ['level', 'won'], rows: 2, sizeBytes: 18 })
      expect((await a.req('GET', `/api/ml-models/${m.id}/datasets`, { token: admin })).body).toEqual([
        ok.body,
      ])
    })

    test('an upload has at most 1,000 columns, two are read at once (429 past it), and a time series at most max_rows intervals', async () => {
      const m = await newModel(a, admin, { gameId, type: 'CLASSIFICATION' })
      const path = `/api/ml-models/${m.id}/datasets`
      const wide = `${Array.from({ length: 1_001 }, (_, i) => `c${i}`).join(',')}\n${'1,'.repeat(1_000)}1\n`
      const tooWide = await a.req('POST', path, {
        token: admin,
        raw: wide,
        headers: { 'content-type': 'text/csv' },
      })
      expect([tooWide.status, tooWide.body.message]).toEqual([400, 'body: at most 1000 columns, got 1001'])
      // Two uploads whose bodies have not ended hold both places; a third is 429 at once.
      const open: Array<ReadableStreamDefaultController<Uint8Array>> = []
      const slow = () =>
        a.app.handle(
          new Request(`http://localhost${path}`, {
            method: 'POST',
            headers: { authorization: `Bearer ${admin}`, 'content-type': 'text/csv' },
            // Pulled once the route took its place and reads the body: with no queue to fill
            // (highWaterMark 0), a stream is pulled only when read, not as soon as it starts.
            body: new ReadableStream<Uint8Array>(
              {
                start: (c) => void open.push(c),
                pull: () => void reading++,
              },
              { highWaterMark: 0 },
            ),
            duplex: 'half',
          } as RequestInit),
        )
      let reading = 0
      const held = [slow(), slow()]
      await until(() => reading >= 2, { what: 'both uploads reading their bodies' })
      const third = await a.req('POST', path, {
        token: admin,
        raw: 'a\n1\n',
        headers: { 'content-type': 'text/csv' },
      })
      expect([third.status, third.headers.get('retry-after')]).toEqual([429, '1'])
      for (const c of open) {
        c.enqueue(new TextEncoder().encode('a\n1\n'))
        c.close()
      }
      expect((await Promise.all(held)).map((r) => r.status)).toEqual([201, 201])
      // A range of more intervals than max_rows fails before it allocates them.
      const ts = await newModel(a, admin, { gameId, type: 'TIME_SERIES' })
      const job = await a.req('POST', `/api/ml-models/${ts.id}/train`, {
        token: admin,
        body: {
          datasetConfig: { source: 'events', query: 'from=0&to=20000000000000&interval=hour', features: [] },
          hyperparameters: { seasonLength: 2 },
        },
      })
      const done = await waitJob(a, admin, ts.id, job.body.id)
      expect([done.status, done.error]).toEqual([
        'failed',
        expect.stringContaining('intervals, more than the'),
      ])
    })

    test('predictions past the retention are purged; the daily counts stay', async () => {
      // 150 rows: a training set under this app's 10 KB upload limit.
      const { model } = await trainedClassifier(a, admin, gameId, 7, undefined, 150)
      await a.req('POST', `/api/ml-models/${model.id}/deploy`, { token: admin, body: {} })
      const ids: string[] = []
      for (let i = 0; i < 6; i++)
        ids.push(
          (
            await a.req('POST', `/api/ml-models/${model.id}/predict`, {
              token: admin,
              body: { features: { sessions: i, days_since_purchase: 1 } },
            })
          ).body.predictionId,
        )
      await a.req('GET', `/api/ml-models/${model.id}/stats`, { token: admin }) // flushes the log
      await a.db.run('UPDATE ml_predictions SET created_at = ? WHERE id IN (?, ?, ?, ?)', [
        Date.now() - 40 * DAY,
        ...ids.slice(0, 4),
      ])
      expect(await purgePredictions(a.db, Date.now() - 30 * DAY)).toBe(4)
      const fb = await a.req('POST', `/api/ml-models/${model.id}/feedback`, {
        token: admin,
        body: { predictionId: ids[0], actual: 'no' },
      })
      expect(fb.status).toBe(404)
      expect(
        (
          await a.req('POST', `/api/ml-models/${model.id}/feedback`, {
            token: admin,
            body: { predictionId: ids[5], actual: 'no' },
          })
        ).status,
      ).toBe(200)
      expect(
        (await a.req('GET', `/api/ml-models/${model.id}/stats`, { token: admin })).body.predictions,
      ).toBe(6)
    })
  })
})

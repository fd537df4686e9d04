import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { EventsService, ScannedEvent } from '../../plugins/ingest/types'
import { fromEvents } from '../../plugins/ml/dataset'
import {
  SECRET,
  mlApp,
  newGame,
  newModel,
  sameStoreInstance,
  uploadCsv,
  waitJob,
} from '../../plugins/ml/testing'
import { signRequest } from '../../sdk/sign'
import { type TestApp, forEachEngine } from '../helpers'

/*
 * The nineteenth session's ML audit, replayed as its attackers made it: one "Infinity" sent with
 * the public SDK key left a time series model whose every read answered 400 (its metrics stored
 * as null), and broke the game's other trainings; a CSV upload had no row cap (5M one-cell rows
 * took the server past 1.3 GB); a deleted game's models kept serving, training and holding
 * their data; a training from events held every scanned row, usable or not; 'constructor' and
 * '__proto__' passed the algorithm and hyperparameter lookups.
 */
const HOUR = 3_600_000
const MAX_ROWS = 300

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  let sdk: string
  beforeAll(async () => {
    a = await mlApp(engine, { max_rows: MAX_ROWS })
    admin = await a.token('admin')
    gameId = await newGame(a, admin)
    sdk = (
      await a.req('POST', '/api/api-keys', {
        token: admin,
        body: { name: 'client', gameId, environment: 'dev' },
      })
    ).body.key
  })
  afterAll(() => a.stop())

  /** A batch sent with the game's SDK key, as a game client (or anyone holding the client) does. */
  const batch = async (name: string, attrs: Array<Record<string, string>>, hoursApart = 1) => {
    const now = Date.now()
    const body = JSON.stringify(
      attrs.map((at, i) => ({
        event_id: crypto.randomUUID(),
        event_type: 'track',
        event_name: name,
        device_id: 'd',
        ts_client: new Date(now - i * hoursApart * HOUR).toISOString(),
        user_id: `u${i}`,
        attrs: at,
      })),
    )
    const r = await fetch(`${a.listen()}/v1/batch`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': sdk, ...(await signRequest(SECRET, body)) },
      body,
    })
    expect(r.status).toBe(200)
  }
  const train = async (modelId: string, body: unknown) => {
    const r = await a.req('POST', `/api/ml-models/${modelId}/train`, { token: admin, body })
    expect(r.status).toBe(202)
    return waitJob(a, admin, modelId, r.body.id)
  }
  const readable = async (modelId: string) => {
    for (const path of ['', '/versions', '/training-jobs'])
      expect([
        path,
        (await a.req('GET', `/api/ml-models/${modelId}${path}`, { token: admin })).status,
      ]).toEqual([path, 200])
  }
  const finite = (metrics: Record<string, unknown>) =>
    expect(Object.values(metrics).every((v) => typeof v === 'number' && Number.isFinite(v))).toBe(true)

  describe('audit 19: ml', () => {
    test('"Infinity" and "1e400" sent with the SDK key are no numbers: the time series trains, finite and readable', async () => {
      await batch('score', [
        ...Array.from({ length: 60 }, () => ({ value: '5' })),
        { value: 'Infinity' },
        { value: '-1e400' },
      ])
      const m = await newModel(a, admin, { gameId, type: 'TIME_SERIES' })
      const job = await train(m.id, {
        datasetConfig: {
          source: 'events',
          query: `event=score&interval=hour&from=${Date.now() - 4 * 24 * HOUR}`,
          features: [],
          label: 'value',
        },
        hyperparameters: { seasonLength: 24 },
      })
      expect([job.status, job.error]).toEqual(['completed', undefined])
      finite(job.metrics)
      await readable(m.id)
      finite((await a.req('GET', `/api/ml-models/${m.id}`, { token: admin })).body.metrics)
    })

    test('a classifier over events, one of them "Infinity", skips that row and trains', async () => {
      await batch(
        'clk',
        Array.from({ length: 100 }, (_, i) => ({
          x: i === 0 ? 'Infinity' : String(i % 17),
          y: String(i % 2),
        })),
        0.01,
      )
      const m = await newModel(a, admin, { gameId, type: 'CLASSIFICATION' })
      const job = await train(m.id, {
        datasetConfig: { source: 'events', query: 'event=clk', features: ['x'], label: 'y' },
      })
      expect([job.status, job.rowsUsed, job.rowsSkipped]).toEqual(['completed', 99, 1])
      finite(job.metrics)
    })

    test('values whose sums overflow fail the training, saying so; nothing is stored and reads stay 200', async () => {
      // Two finite 1e308 in one hour sum to Infinity.
      await batch(
        'big',
        [{ v: '1e308' }, { v: '1e308' }, ...Array.from({ length: 50 }, () => ({ v: '1' }))],
        0,
      )
      const ts = await newModel(a, admin, { gameId, type: 'TIME_SERIES' })
      const job = await train(ts.id, {
        datasetConfig: {
          source: 'events',
          query: `event=big&interval=hour&from=${Date.now() - 2 * 24 * HOUR}`,
          features: [],
          label: 'v',
        },
        hyperparameters: { seasonLength: 2 },
      })
      expect([job.status, job.error]).toEqual(['failed', expect.stringContaining('too large to fit')])
      await readable(ts.id)
      const reg = await newModel(a, admin, { gameId, type: 'REGRESSION' })
      const ds = await uploadCsv(
        a,
        admin,
        reg.id,
        `x,y\n${Array.from({ length: 20 }, (_, i) => `${i % 2 ? '1e308' : '-1e308'},${i}`).join('\n')}\n`,
      )
      const failed = await train(reg.id, {
        datasetConfig: { source: 'csv', query: ds, features: ['x'], label: 'y' },
      })
      expect([failed.status, failed.error]).toEqual([
        'failed',
        expect.stringContaining("feature 'x' has values too large"),
      ])
      expect((await a.req('GET', `/api/ml-models/${reg.id}/versions`, { token: admin })).body).toEqual([])
    })

    test('metrics stored as null by an earlier release no longer fail the reads', async () => {
      const m = await newModel(a, admin, { gameId, type: 'REGRESSION' })
      const ds = await uploadCsv(
        a,
        admin,
        m.id,
        `x,y\n${Array.from({ length: 20 }, (_, i) => `${i},${2 * i}`).join('\n')}\n`,
      )
      const job = await train(m.id, {
        datasetConfig: { source: 'csv', query: ds, features: ['x'], label: 'y' },
      })
      expect(job.status).toBe('completed')
      const broken = JSON.stringify({ rmse: null, mae: null, r2: 1, rows: 20 })
      await a.db.run('UPDATE ml_model_versions SET metrics = ? WHERE model_id = ?', [broken, m.id])
      await a.db.run('UPDATE ml_training_jobs SET metrics = ? WHERE model_id = ?', [broken, m.id])
      await readable(m.id)
      expect((await a.req('GET', `/api/ml-models/${m.id}`, { token: admin })).body.metrics).toEqual({
        r2: 1,
        rows: 20,
      })
    })

    test('a CSV upload over max_rows answers 400 naming the limit; a set stored before the cap trains on max_rows rows', async () => {
      const m = await newModel(a, admin, { gameId, type: 'ANOMALY_DETECTION' })
      const csv = (n: number) => `x\n${'1\n2\n'.repeat(n / 2)}`
      const up = (raw: string) =>
        a.req('POST', `/api/ml-models/${m.id}/datasets`, {
          token: admin,
          raw,
          headers: { 'content-type': 'text/csv' },
        })
      const over = await up(csv(MAX_ROWS + 2))
      expect([over.status, over.body.details.field]).toEqual([400, 'body'])
      expect(over.body.message).toContain(`more than ${MAX_ROWS} rows (plugins.ml.max_rows)`)
      const at = await up(csv(MAX_ROWS))
      expect([at.status, at.body.rows]).toEqual([201, MAX_ROWS])
      // Uploaded before uploads were held to max_rows: a training reads its first max_rows rows.
      await a.db.run('UPDATE ml_datasets SET content = ?, rows_count = ? WHERE id = ?', [
        csv(4 * MAX_ROWS),
        4 * MAX_ROWS,
        at.body.id,
      ])
      const job = await train(m.id, { datasetConfig: { source: 'csv', query: at.body.id, features: ['x'] } })
      expect([job.status, job.rowsUsed]).toEqual(['completed', MAX_ROWS])
    })

    test('a training naming features no event carries fails with "no usable rows"', async () => {
      await batch(
        'plain',
        Array.from({ length: 40 }, (_, i) => ({ other: String(i) })),
        0.01,
      )
      const m = await newModel(a, admin, { gameId, type: 'ANOMALY_DETECTION' })
      const job = await train(m.id, {
        datasetConfig: { source: 'events', query: 'event=plain', features: ['f0', 'f1', 'f2'] },
      })
      expect([job.status, job.error]).toEqual([
        'failed',
        'no usable rows: 40 rows lacked a feature or the label',
      ])
    })

    test('deleting a game deletes its models: reads and predict 404, their data gone, before the delete answers', async () => {
      const g = await newGame(a, admin)
      const m = await newModel(a, admin, { gameId: g, type: 'REGRESSION' })
      const ds = await uploadCsv(
        a,
        admin,
        m.id,
        `x,y\n${Array.from({ length: 20 }, (_, i) => `${i},${2 * i}`).join('\n')}\n`,
      )
      expect(
        (await train(m.id, { datasetConfig: { source: 'csv', query: ds, features: ['x'], label: 'y' } }))
          .status,
      ).toBe('completed')
      expect((await a.req('POST', `/api/ml-models/${m.id}/deploy`, { token: admin, body: {} })).status).toBe(
        200,
      )
      const predict = () =>
        a.req('POST', `/api/ml-models/${m.id}/predict`, { token: admin, body: { features: { x: 3 } } })
      expect((await predict()).status).toBe(200)
      // A model of another game stays.
      const kept = await newModel(a, admin, { gameId, type: 'REGRESSION' })
      expect((await a.req('DELETE', `/api/games/${g}`, { token: admin })).status).toBe(204)
      expect((await a.req('GET', `/api/ml-models/${m.id}`, { token: admin })).status).toBe(404)
      expect((await predict()).status).toBe(404)
      expect((await a.req('GET', `/api/ml-models?gameId=${g}`, { token: admin })).body.total).toBe(0)
      for (const table of [
        'ml_models',
        'ml_model_versions',
        'ml_training_jobs',
        'ml_datasets',
        'ml_predictions',
        'ml_daily',
      ])
        expect([
          table,
          await a.db.all(
            `SELECT 1 AS x FROM ${table} WHERE ${table === 'ml_models' ? 'id' : 'model_id'} = ?`,
            [m.id],
          ),
        ]).toEqual([table, []])
      expect((await a.req('GET', `/api/ml-models/${kept.id}`, { token: admin })).status).toBe(200)
    })

    test('at start, the models of a game that no longer exists are deleted', async () => {
      const g = await newGame(a, admin)
      const m = await newModel(a, admin, { gameId: g, type: 'CLUSTERING' })
      const kept = await newModel(a, admin, { gameId, type: 'CLUSTERING' })
      // A release before deletions took the models along deleted the game alone.
      expect(await a.db.run('DELETE FROM games WHERE id = ?', [g])).toBe(1)
      const b = await sameStoreInstance(a)
      try {
        expect((await b.req('GET', `/api/ml-models/${m.id}`, { token: admin })).status).toBe(404)
        expect((await b.req('GET', `/api/ml-models/${kept.id}`, { token: admin })).status).toBe(200)
      } finally {
        await b.stop()
      }
    })

    test("'constructor' is no algorithm, nor 'constructor' or 'hasOwnProperty' a hyperparameter (400 naming it)", async () => {
      for (const algorithm of ['constructor', 'hasOwnProperty', '__proto__']) {
        const r = await a.req('POST', '/api/ml-models', {
          token: admin,
          body: { gameId, name: `proto-${algorithm}`, type: 'CLASSIFICATION', algorithm },
        })
        // Not a built-in: a model trained elsewhere, as any other name.
        expect([algorithm, r.status, r.body.algorithm]).toEqual([algorithm, 201, algorithm])
      }
      const m = await newModel(a, admin, { gameId, type: 'CLUSTERING' })
      const trainRaw = (k: string) =>
        a.req('POST', `/api/ml-models/${m.id}/train`, {
          token: admin,
          raw: `{"datasetConfig":{"source":"events","query":"event=clk","features":["x"]},"hyperparameters":{"${k}":1}}`,
          headers: { 'content-type': 'application/json' },
        })
      for (const k of ['constructor', 'hasOwnProperty', 'toString']) {
        const r = await trainRaw(k)
        expect([k, r.status, r.body.details?.field]).toEqual([k, 400, `body.hyperparameters.${k}`])
        expect(r.body.message).toContain('unknown for kmeans')
      }
      // '__proto__' never reaches the check: the JSON body parser leaves it out.
      const proto = await trainRaw('__proto__')
      expect([proto.status, Object.keys(proto.body.hyperparameters).sort()]).toEqual([
        202,
        ['k', 'maxIterations', 'seed', 'testSplit', 'tolerance'],
      ])
      await waitJob(a, admin, m.id, proto.body.id)
    })
  })
})

/** A scan of `pages` pages of events carrying none of the features, each value a tracked object. */
function fakeEvents(pages: number, size: number) {
  const made: WeakRef<object>[] = []
  let served = 0
  let aliveAtEnd = -1
  const events: Pick<EventsService, 'scan'> = {
    scan: async (q) => {
      // A task of its own per page, as a store read is (targets of new WeakRefs live to the task's end).
      await Bun.sleep(0)
      if (served === pages) {
        // Every page has been handed over: whatever the builder still holds is alive now.
        Bun.gc(true)
        aliveAtEnd = made.filter((w) => w.deref() !== undefined).length
        return []
      }
      const page: ScannedEvent[] = []
      for (let i = 0; i < size; i++) {
        const marker = { big: 'x' }
        made.push(new WeakRef(marker))
        const id = (q.afterId ?? 0) + i + 1
        page.push({
          id,
          gameId: 'g',
          env: 'dev',
          event: 'plain',
          ts: id,
          userId: `u${id}`,
          sessionId: null,
          amountCents: null,
          // f0 is there, not a number: the row is read, and not usable.
          props: { f0: marker, attrs: {} },
        })
      }
      served++
      return page
    },
  }
  return { events: events as EventsService, made, alive: () => aliveAtEnd }
}

describe('audit 19: ml dataset builder', () => {
  test('rows that are not usable are counted while scanning, not kept', async () => {
    const pages = 20
    const size = 1_000
    const f = fakeEvents(pages, size)
    const built = await fromEvents(
      'ANOMALY_DETECTION',
      { source: 'events', query: 'event=plain&from=0&to=1000000', features: ['f0', 'f1'] },
      {
        events: f.events,
        gameId: 'g',
        maxRows: 1_000_000,
        now: 2_000_000,
        check: () => undefined,
        progress: () => undefined,
      },
    )
    expect([built.rowsUsed, built.rowsSkipped, built.data.x.length]).toEqual([0, pages * size, 0])
    // The last page or so may still be reachable from the stack; the 20,000 rows are not (they
    // all were, as row objects, until the set was assembled).
    expect(f.made.length).toBe(pages * size)
    expect(f.alive()).toBeLessThanOrEqual(3 * size)
  })
})

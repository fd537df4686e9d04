import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { newModel } from '../../plugins/ml/testing'
import { recurringCalendar } from '../../plugins/rosters/testing'
import { type TestApp, forEachEngine } from '../helpers'
import { surfaceApp } from './surface-app'

/*
 * Issue 34 point 7: no input freezes the server. Each heavy request is checked by its outcome
 * and by ordering (a /healthz sent while it runs answers first), never by a timed assertion.
 */

const DAY = 86_400_000
/** Sends `heavy`, then `/healthz` once `started` says the heavy one is under way; the order they finished in. */
async function order(
  heavy: () => Promise<Response>,
  started: Promise<unknown>,
  healthz: () => Promise<Response>,
) {
  const finished: string[] = []
  const h = heavy().then(async (r) => {
    finished.push('heavy')
    return r
  })
  await started
  const health = await healthz()
  finished.push('healthz')
  const res = await h
  return { finished, health: health.status, heavy: res.status, body: await res.json() }
}

forEachEngine((engine) => {
  let a: TestApp
  let base: string
  let admin: string
  beforeAll(async () => {
    // Long enough for 4096 occurrences on a loaded machine (1.5 s was not, at load 12).
    a = await surfaceApp(engine, { plugins: { rosters: { import_timeout_ms: 4000 } } })
    base = a.listen()
    admin = await a.token('admin')
  })
  afterAll(() => a.stop())

  const importCal = (id: string, text: string, token: string | null = admin) =>
    a.req('POST', `/api/v1/rosters/${id}/import`, {
      token,
      raw: text,
      headers: { 'content-type': 'text/calendar' },
    })

  describe('iCalendar import', () => {
    test('FREQ=SECONDLY from 60 days back, or from New Year, ends at once with 400 naming the bound', async () => {
      for (const start of [Date.now() - 60 * DAY, Date.UTC(new Date().getUTCFullYear(), 0, 1)]) {
        const r = await importCal('storm', recurringCalendar(start, 'FREQ=SECONDLY'))
        expect(r.status).toBe(400)
        expect(r.body.message).toContain('recur more than 4096 times')
      }
      expect((await a.req('GET', '/api/v1/rosters/storm', { token: admin })).status).toBe(404)
    })

    test('the caller and the roster id are checked before the calendar is read', async () => {
      const storm = recurringCalendar(Date.now() - 60 * DAY, 'FREQ=SECONDLY')
      expect((await importCal('storm', storm, null)).status).toBe(401)
      expect((await importCal('storm', storm, await a.token('viewer'))).status).toBe(403)
      const bad = await importCal('-no-', storm)
      expect(bad.status).toBe(400)
      expect(bad.body.message).toContain('params.id')
    })

    test('a rule that never occurs runs on its own thread until its time is up; /healthz answers meanwhile', async () => {
      // Feb 30 never comes: ical.js steps second by second inside one call, forever.
      const never = recurringCalendar(Date.now() - DAY, 'FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=30')
      const heavy = () =>
        fetch(`${base}/api/v1/rosters/never/import`, {
          method: 'POST',
          headers: { authorization: `Bearer ${admin}`, 'content-type': 'text/calendar' },
          body: never,
        })
      const r = await order(heavy, Promise.resolve(), () => fetch(`${base}/healthz`))
      expect(r.finished).toEqual(['healthz', 'heavy'])
      expect(r.health).toBe(200)
      expect(r.heavy).toBe(400)
      expect(r.body.message).toContain('did not expand within 4000 ms')
    })
  })

  describe('a large CSV dataset', () => {
    test('is parsed off the event loop: /healthz sent once the upload is read answers first', async () => {
      const game = await a.req('POST', '/api/games', {
        token: admin,
        body: {
          name: 'Bounds',
          genre: 'STRATEGY',
          platforms: ['IOS'],
          timezone: 'UTC',
          defaultCurrency: 'USD',
        },
      })
      const model = await newModel(a, admin, { gameId: game.body.id, type: 'CLASSIFICATION' })
      const rows = ['sessions,days,label,note']
      let size = 0
      for (let i = 0; size < 9.5 * 1024 * 1024; i++) {
        const line = `${i % 50},${(i * 7) % 120},${i % 2 ? 'yes' : 'no'},"player ${i}, seen ""often"""`
        rows.push(line)
        size += line.length + 1
      }
      const csv = new TextEncoder().encode(rows.join('\n'))
      // Handed to the app in process: the server itself pulls the body, so when it asks past the
      // last chunk it has read the whole upload and is about to parse it.
      let read!: () => void
      const consumed = new Promise<void>((resolve) => {
        read = resolve
      })
      let offset = 0
      const body = new ReadableStream<Uint8Array>({
        pull(c) {
          if (offset >= csv.length) {
            read()
            c.close()
            return
          }
          c.enqueue(csv.subarray(offset, offset + 1024 * 1024))
          offset += 1024 * 1024
        },
      })
      const upload = new Request(`http://localhost/api/ml-models/${model.id}/datasets?name=big.csv`, {
        method: 'POST',
        headers: { authorization: `Bearer ${admin}`, 'content-type': 'text/csv' },
        body,
      })
      const r = await order(
        () => a.app.handle(upload),
        consumed,
        () => a.app.handle(new Request('http://localhost/healthz')),
      )
      expect(r.finished).toEqual(['healthz', 'heavy'])
      expect(r.heavy).toBe(201)
      expect(r.body).toMatchObject({ rows: rows.length - 1, columns: ['sessions', 'days', 'label', 'note'] })
    })
  })

  describe('unauthenticated routes and JSON', () => {
    test('login takes 64 KB: a larger body is 413 before it is read', async () => {
      const r = await fetch(`${base}/api/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'admin@localhost', password: 'x'.repeat(1024 * 1024) }),
      })
      expect(r.status).toBe(413)
      expect((await r.json()).details).toEqual({ limit: 64 * 1024 })
    })

    test('JSON nested past 64 levels is 400 naming the body, not 500', async () => {
      for (const depth of [65, 100_000]) {
        const raw = `{"email":${'['.repeat(depth)}${']'.repeat(depth)},"password":"x"}`
        const r = await a.req('POST', '/api/auth/login', {
          raw,
          headers: { 'content-type': 'application/json' },
        })
        expect(r.status, String(depth)).toBe(400)
        expect(r.body.message).toBe('body: nested deeper than 64 levels')
      }
      const ok = `{"email":${'['.repeat(60)}${']'.repeat(60)},"password":"x"}`
      expect(
        (await a.req('POST', '/api/auth/login', { raw: ok, headers: { 'content-type': 'application/json' } }))
          .body.message,
      ).toContain('body.email')
    })
  })
})

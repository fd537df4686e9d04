import { afterAll, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { HyperLogLog } from '../plugins/analytics/lib/hll'
import { signRequest } from '../sdk/sign'
import { engines, scratchDatabase } from './helpers'
import { type Running, startServer } from './process'

/**
 * Issue 35 point 3, from outside: a server process on each engine. Every acknowledged event is
 * counted once by the log's consumers, in the exact counters (DAU) and in the HyperLogLog
 * sketches (distinct users per event): after traffic stops (once, a changed sketch waited for a
 * later commit that never came), after SIGTERM and a restart, and after kill -9 right after the
 * acknowledgement and a restart (the consumers go on from their committed cursors).
 */
const root = join(import.meta.dir, '..')
/** What the sketch of players 0..n-1 estimates: a sketch that lost or doubled none answers exactly this. */
const sketchOf = (n: number) => {
  const h = new HyperLogLog()
  for (let i = 0; i < n; i++) h.add(`player-${i}`)
  return h.count()
}
const SECRET = 'crash-test-secret'
const running: Running[] = []
const cleanups: Array<() => Promise<void> | void> = []
afterAll(async () => {
  for (const r of running) r.proc.kill('SIGKILL')
  await Promise.all(running.map((r) => r.proc.exited))
  for (const c of cleanups) await c()
}, 30_000)

for (const engine of engines.filter((e) => e !== 'mysql'))
  test(`[${engine}] idle, SIGTERM and kill -9: every acknowledged user counted once`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'liveops-crash-'))
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
    const env: Record<string, string> = { ADMIN_PASSWORD: 'crash-admin-pw', INGEST_SIGNING_SECRET: SECRET }
    if (engine === 'postgres') {
      const db = await scratchDatabase('liveops_test_crash')
      cleanups.push(() => db.drop())
      env.DATABASE_URL = db.url
    }
    const config = join(dir, 'liveops.yaml')
    await Bun.write(
      config,
      `data_dir: ${dir}
rate_limit: { requests_per_minute: 0, burst: 0 }
plugins: { games: {}, ingest: { purge_interval_minutes: 0 }, analytics: {} }
`,
    )
    const start = async () => {
      const s = await startServer([process.execPath, 'core/main.ts', '--config', config], env, { cwd: root })
      running.push(s)
      return s
    }
    let s = await start()
    const api = async (path: string, body?: unknown, token?: string) => {
      const r = await fetch(`${s.base}${path}`, {
        method: body === undefined ? 'GET' : 'POST',
        headers: {
          'content-type': 'application/json',
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      })
      return { status: r.status, body: await r.json(), asOf: r.headers.get('x-as-of') }
    }
    const login = async () =>
      (await api('/api/auth/login', { email: 'admin@localhost', password: 'crash-admin-pw' })).body
        .token as string
    let token = await login()
    const game = await api(
      '/api/games',
      { name: 'Crash Quest', genre: 'PUZZLE', platforms: ['WEB'], timezone: 'UTC', defaultCurrency: 'EUR' },
      token,
    )
    expect(game.status).toBe(201)
    const gameId = game.body.id as string
    const send = async (from: number, n: number) => {
      const events = Array.from({ length: n }, (_, i) => ({
        event: 'session_start',
        ts: String(Date.now()),
        game_id: gameId,
        env: 'prod',
        uid: `player-${from + i}`,
        event_id: `start-${from + i}`,
      }))
      const body = JSON.stringify(events)
      const r = await fetch(`${s.base}/api/ingest/events`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(await signRequest(SECRET, body)) },
        body,
      })
      expect(r.status).toBe(200)
    }
    /** DAU (exact counters) and distinct users of session_start (its sketch), as the API answers them. */
    const counted = async () => {
      const q = `gameId=${gameId}&env=prod`
      const dau = await api(`/api/v1/analytics/warehouse/dau?${q}&days=1`, undefined, token)
      const behavior = await api(`/api/v1/analytics/behavior?${q}&events=session_start`, undefined, token)
      expect(dau.asOf).toBeTruthy()
      return {
        dau: dau.body.points.at(-1).dau as number,
        users: behavior.body.events.find((e: { event: string }) => e.event === 'session_start')
          ?.users as number,
      }
    }

    // 50 users, then nothing: both counts hold all of them.
    await send(0, 50)
    await Bun.sleep(500)
    expect(await counted()).toEqual({ dau: 50, users: sketchOf(50) })

    // 50 more acknowledged just before SIGTERM: a clean stop loses none of them.
    await send(50, 50)
    s.proc.kill('SIGTERM')
    expect(await s.proc.exited).toBe(0)
    s = await start()
    token = await login()
    expect(await counted()).toEqual({ dau: 100, users: sketchOf(100) })

    // 50 more acknowledged, then kill -9 at once: the raw rows are committed, and the consumers
    // of the restarted process take them in from where their cursors were committed.
    await send(100, 50)
    s.proc.kill('SIGKILL')
    await s.proc.exited
    s = await start()
    token = await login()
    expect(await counted()).toEqual({ dau: 150, users: sketchOf(150) })
    // Retries of all 150 (same event_ids) change nothing.
    await send(0, 150)
    expect(await counted()).toEqual({ dau: 150, users: sketchOf(150) })
    s.proc.kill('SIGTERM')
    await s.proc.exited
  }, 90_000)

import { afterAll, beforeAll, expect, test } from 'bun:test'
import { existsSync } from 'node:fs'
import { plugins } from '../../plugins'
import { signRequest } from '../../sdk/sign'
import { type TestApp, forEachEngine, makeApp } from '../helpers'

// Issue 15 point 8: the exposition passes `promtool check metrics` except for the two names spec 3
// decides (`svc_agents_total` is a gauge, `svc_db_latency_ms` spells its unit). `.ci/run`
// installs Debian's prometheus package, which carries promtool.

const PROMTOOL = '/usr/bin/promtool'
if (!existsSync(PROMTOOL))
  throw new Error(`${PROMTOOL} is missing: apt-get install -y prometheus (.ci/run does)`)
const SPEC_NAMES = [
  'svc_agents_total non-counter metrics should not have "_total" suffix',
  'svc_db_latency_ms metric names should not contain abbreviated units',
]
const SECRET = 'promtool-secret-5150'

forEachEngine((engine) => {
  let a: TestApp
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        ...Object.fromEntries(Object.keys(plugins).map((n) => [n, {}])),
        ingest: { signing_secret: SECRET },
      },
      config: { telemetry: { prometheus: { enabled: true } } },
    })
    // What `liveops serve` adds: prom-client's runtime metrics.
    a.metrics.collectDefaults()
  })
  afterAll(() => a.stop())

  test('every plugin enabled, traffic on labelled series: promtool finds only the spec names', async () => {
    const admin = await a.token('admin')
    const g = await a.req('POST', '/api/games', {
      token: admin,
      body: {
        name: 'Lint',
        genre: 'SPORTS',
        platforms: ['IOS'],
        timezone: 'America/Lima',
        defaultCurrency: 'PEN',
      },
    })
    expect(g.status).toBe(201)
    const body = JSON.stringify([
      { event: 'login', ts: String(Date.now()), game_id: g.body.id, env: 'prod', user_id: 'p' },
    ])
    const ing = await a.app.handle(
      new Request('http://localhost/api/ingest/events', {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(await signRequest(SECRET, body)) },
        body,
      }),
    )
    expect(ing.status).toBeLessThan(300)
    await a.req('GET', '/api/games/nope', { token: admin })
    const expo = await a.req('GET', '/metrics/prometheus')
    expect(expo.status).toBe(200)
    const text = String(expo.body)
    expect(text).toContain('svc_http_request_duration_seconds_bucket{')
    expect(text).toContain('nodejs_heap_size_used_bytes')
    const p = Bun.spawn([PROMTOOL, 'check', 'metrics'], {
      stdin: new TextEncoder().encode(text),
      stdout: 'pipe',
      stderr: 'pipe',
    })
    const out = `${await new Response(p.stdout).text()}${await new Response(p.stderr).text()}`
    const code = await p.exited
    const findings = out
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean)
      .sort()
    expect(findings).toEqual(SPEC_NAMES)
    // 3: lint findings only; 1 would mean the exposition does not even parse.
    expect(code).toBe(3)
  }, 60_000)
})

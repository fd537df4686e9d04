import { afterAll, beforeAll, expect, test } from 'bun:test'
import { existsSync } from 'node:fs'
import { type Browser, chromium } from 'playwright-core'
import { type TestApp, forEachEngine, makeApp } from '../helpers'

// Issue 15 point 6 as a browser meets it: a game's page on another origin sends events with the
// SDK (API key, JSON body: a preflighted request) and reads the public config; an operator page
// is served only from the origins the YAML lists. `.ci/run` installs Debian's chromium.

const CHROMIUM = '/usr/bin/chromium'
if (!existsSync(CHROMIUM))
  throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)`)

const PAGE = `<!doctype html><meta charset="utf-8"><title>sdk page</title>
<script type="module">
import { LiveopsClient } from '/sdk.js'
window.run = async ({ api, gameId, apiKey, token }) => {
  const errors = []
  const client = new LiveopsClient({
    endpoint: api, gameId, env: 'prod', apiKey, flushIntervalMs: 0, maxRetries: 0, flushOnExit: false,
    onError: (e) => errors.push(String(e)),
  })
  client.identify('browser-player-7')
  client.track('level_up', { level: 17 })
  client.track('session_start', { device: 'chromium' })
  await client.flush()
  const res = await fetch(api + '/api/config/' + gameId + '/prod')
  const config = await res.json()
  let operator
  try {
    const r = await fetch(api + '/api/games/' + gameId, { headers: { authorization: 'Bearer ' + token } })
    operator = { status: r.status, limit: r.headers.get('x-ratelimit-limit'), name: (await r.json()).name }
  } catch (e) {
    operator = String(e)
  }
  return { errors, config, configEtag: res.headers.get('etag'), operator }
}
window.ready = true
</script>`

let browser: Browser
let pages: ReturnType<typeof Bun.serve>
beforeAll(async () => {
  const built = await Bun.build({ entrypoints: [`${import.meta.dir}/../../sdk/index.ts`], target: 'browser' })
  if (!built.success) throw new Error(built.logs.join('\n'))
  const sdk = await built.outputs[0]!.text()
  pages = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    routes: {
      '/': new Response(PAGE, { headers: { 'content-type': 'text/html' } }),
      '/sdk.js': new Response(sdk, { headers: { 'content-type': 'text/javascript' } }),
    },
  })
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] })
})
afterAll(async () => {
  await browser?.close()
  pages?.stop(true)
})

forEachEngine((engine) => {
  let a: TestApp
  let api: string
  let gameId: string
  let apiKey: string
  let experimentId: string
  // The operator origin the YAML lists; the same page from `localhost` is another, unlisted origin.
  const listed = () => `http://127.0.0.1:${pages.port}`
  const unlisted = () => `http://localhost:${pages.port}`

  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: { games: {}, ingest: { signing_secret: 'browser-test-secret-0451' }, experiments: {} },
      config: { server: { cors_origins: [listed()] }, rate_limit: { requests_per_minute: 777, burst: 50 } },
    })
    api = a.listen()
    const admin = await a.token('admin')
    const game = await a.req('POST', '/api/games', {
      token: admin,
      body: {
        name: 'Browser Quest',
        genre: 'PUZZLE',
        platforms: ['WEB'],
        timezone: 'Asia/Tokyo',
        defaultCurrency: 'JPY',
      },
    })
    expect(game.status).toBe(201)
    gameId = game.body.id
    const key = await a.req('POST', '/api/api-keys', {
      token: admin,
      body: { name: 'web build', gameId, environment: 'prod' },
    })
    expect(key.status).toBe(201)
    apiKey = key.body.key
    const exp = await a.req('POST', '/api/experiments', {
      token: admin,
      body: {
        gameId,
        environment: 'prod',
        name: 'tile colours',
        config: {
          variants: [
            { name: 'amber', weight: 30 },
            { name: 'teal', weight: 70 },
          ],
          metrics: { primary: 'level_up', secondary: [] },
        },
      },
    })
    expect(exp.status).toBe(201)
    experimentId = exp.body.id
    expect((await a.req('POST', `/api/experiments/${experimentId}/publish`, { token: admin })).status).toBe(
      200,
    )
  })
  afterAll(() => a.stop())

  const runPage = async (origin: string) => {
    const page = await browser.newPage()
    try {
      await page.goto(`${origin}/`)
      await page.waitForFunction(() => (window as unknown as { ready?: boolean }).ready === true)
      const token = await a.token('viewer')
      return await page.evaluate(
        (args) =>
          (window as unknown as { run: (x: typeof args) => Promise<Record<string, unknown>> }).run(args),
        { api, gameId, apiKey, token },
      )
    } finally {
      await page.close()
    }
  }
  const stored = async () =>
    Number(
      (
        await a.db.get<{ n: number }>(
          "SELECT COUNT(*) AS n FROM ingest_events WHERE game_id = ? AND env = 'prod' AND user_id = 'browser-player-7'",
          [gameId],
        )
      )?.n ?? 0,
    )

  test('a game page on an unlisted origin sends events with the SDK and reads the public config; the operator API refuses it', async () => {
    const before = await stored()
    const out = await runPage(unlisted())
    expect(out.errors).toEqual([])
    expect(await stored()).toBe(before + 2)
    expect(out.config).toEqual([expect.objectContaining({ id: experimentId })])
    expect(out.configEtag).toBeTruthy()
    // What a browser reports when CORS refuses: the script never sees the answer.
    expect(out.operator).toContain('Failed to fetch')
  }, 60_000)

  test('an operator page on a listed origin calls the API with its token and reads exposed headers', async () => {
    const out = await runPage(listed())
    expect(out.errors).toEqual([])
    expect(out.operator).toEqual({ status: 200, limit: '777', name: 'Browser Quest' })
  }, 60_000)
})

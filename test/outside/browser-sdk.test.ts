import { afterAll, beforeAll, expect, test } from 'bun:test'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type Browser, chromium } from 'playwright-core'
import { type TestApp, forEachEngine, makeApp, until } from '../helpers'

/*
 * Issue 38 point 5, the browser build of the SDK: the server serves `sdk/` as one ES module at
 * `/sdk/liveops.js`, so a page imports it without a bundler, and the package exports the same
 * build as `liveops/sdk/browser`. A page served from the server imports it, sends a signed event,
 * and the event is read back through the API. `.ci/run` installs Debian's chromium.
 */
const CHROMIUM = '/usr/bin/chromium'
if (!existsSync(CHROMIUM))
  throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)`)
const ROOT = join(import.meta.dir, '../..')

/** The page, at an address of the server's own origin: the import is a path on the server. */
const PAGE = `<!doctype html><meta charset="utf-8"><title>liveops sdk</title>
<script type="module">
import { LiveopsClient, GameEvents, signRequest } from '/sdk/liveops.js'
window.run = async ({ gameId, secret }) => {
  const errors = []
  const client = new LiveopsClient({
    endpoint: location.origin, gameId, env: 'prod', secret, flushIntervalMs: 0, maxRetries: 0, flushOnExit: false,
    onError: (e) => errors.push(String(e)),
  })
  client.identify('page-player-1')
  client.track('level_start', { level: 3 })
  await client.flush()
  const headers = await signRequest(secret, '{}')
  return { errors, acknowledged: client.acknowledged, helpers: typeof GameEvents, signed: Object.keys(headers).sort() }
}
window.ready = true
</script>`

/** A page of another origin loading the module by its full address: a module script is fetched with CORS. */
const ELSEWHERE = (api: string) => `<!doctype html><meta charset="utf-8"><title>elsewhere</title>
<script type="module">
import { LiveopsClient } from '${api}/sdk/liveops.js'
window.loaded = typeof LiveopsClient
</script>`

let browser: Browser
beforeAll(async () => {
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] })
})
afterAll(async () => {
  await browser?.close()
})

test('the package exports the browser build as liveops/sdk/browser: scripts/sdk-bundle.ts writes it', async () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'))
  expect(pkg.exports['./sdk/browser']).toBe('./dist/sdk/liveops.js')
  expect(pkg.scripts.prepack).toContain('scripts/sdk-bundle.ts')
  const dir = mkdtempSync(join(tmpdir(), 'liveops-sdk-'))
  try {
    const out = join(dir, 'liveops.js')
    const p = Bun.spawnSync([process.execPath, join(ROOT, 'scripts/sdk-bundle.ts'), out], { stderr: 'pipe' })
    expect(p.stderr.toString()).toBe('')
    expect(p.exitCode).toBe(0)
    const text = readFileSync(out, 'utf8')
    expect(text).not.toMatch(/\bfrom\s*["']node:|\brequire\(/)
    const sdk = await import(out)
    for (const name of ['LiveopsClient', 'Experiments', 'GameEvents', 'signRequest', 'assign', 'uuidv7'])
      expect(typeof sdk[name]).toBe('function')
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}, 60_000)

forEachEngine((engine) => {
  let a: TestApp
  let api: string
  let admin: string
  let gameId: string
  const SECRET = 'browser-sdk-secret-7731'

  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: { games: {}, ingest: { signing_secret: SECRET }, analytics: {} },
    })
    api = a.listen()
    admin = await a.token('admin')
    const game = await a.req('POST', '/api/games', {
      token: admin,
      body: {
        name: 'Page Quest',
        genre: 'PUZZLE',
        platforms: ['WEB'],
        timezone: 'UTC',
        defaultCurrency: 'EUR',
      },
    })
    expect(game.status).toBe(201)
    gameId = game.body.id
  })
  afterAll(() => a.stop())

  test('GET /sdk/liveops.js is a public, cacheable ES module any origin may load', async () => {
    const r = await fetch(`${api}/sdk/liveops.js`, { headers: { origin: 'https://game.example' } })
    expect(r.status).toBe(200)
    expect(r.headers.get('content-type')).toBe('text/javascript; charset=utf-8')
    expect(r.headers.get('cache-control')).toBe('public, max-age=3600')
    expect(r.headers.get('access-control-allow-origin')).toBe('*')
    const etag = r.headers.get('etag')
    expect(etag).toMatch(/^".+"$/)
    const js = await r.text()
    expect(js).toContain('LiveopsClient')
    expect(js).not.toMatch(/\bfrom\s*["']node:|\brequire\(/)
    const again = await fetch(`${api}/sdk/liveops.js`, { headers: { 'if-none-match': etag! } })
    expect(again.status).toBe(304)
    const zipped = await fetch(`${api}/sdk/liveops.js`, {
      headers: { 'accept-encoding': 'gzip' },
      decompress: false,
    } as RequestInit)
    expect(zipped.headers.get('content-encoding')).toBe('gzip')
    expect(new TextDecoder().decode(Bun.gunzipSync(new Uint8Array(await zipped.arrayBuffer())))).toBe(js)
  })

  test('a page from the server imports /sdk/liveops.js, sends a signed event, and the API reads it back', async () => {
    const page = await browser.newPage()
    try {
      const errors: string[] = []
      page.on('pageerror', (e) => errors.push(String(e)))
      // The page's address is on the server's origin; only the page itself is supplied here,
      // the module and every API call go to the server.
      await page.route(`${api}/sdk-page.html`, (route) =>
        route.fulfill({ status: 200, contentType: 'text/html', body: PAGE }),
      )
      await page.goto(`${api}/sdk-page.html`)
      await page.waitForFunction(() => (window as unknown as { ready?: boolean }).ready === true)
      const out = await page.evaluate(
        (args) =>
          (window as unknown as { run: (x: typeof args) => Promise<Record<string, unknown>> }).run(args),
        { gameId, secret: SECRET },
      )
      expect(errors).toEqual([])
      expect(out.errors).toEqual([])
      expect(out.acknowledged).toBe(1)
      expect(out.helpers).toBe('function')
      expect(out.signed).toEqual(['X-Nonce', 'X-Signature', 'X-Timestamp'])
      const read = async () =>
        (
          await a.req(
            'GET',
            `/api/v1/analytics/behavior/events?gameId=${gameId}&env=prod&event=level_start&userId=page-player-1`,
            { token: admin },
          )
        ).body
      expect(await until(async () => (await read()).total === 1, 5000)).toBe(true)
    } finally {
      await page.close()
    }
  }, 60_000)

  test('a page of another origin imports the module by its address', async () => {
    const pages = Bun.serve({
      port: 0,
      hostname: '127.0.0.1',
      routes: { '/': new Response(ELSEWHERE(api), { headers: { 'content-type': 'text/html' } }) },
    })
    const page = await browser.newPage()
    try {
      await page.goto(`http://localhost:${pages.port}/`)
      await page.waitForFunction(() => (window as unknown as { loaded?: string }).loaded !== undefined)
      expect(await page.evaluate(() => (window as unknown as { loaded: string }).loaded)).toBe('function')
    } finally {
      await page.close()
      pages.stop(true)
    }
  }, 60_000)
})

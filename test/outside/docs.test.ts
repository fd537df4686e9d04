import { afterAll, beforeAll, expect, test } from 'bun:test'
import { existsSync } from 'node:fs'
import { gunzipSync } from 'node:zlib'
import { chromium } from 'playwright-core'
import { SCALAR_ASSET, SCALAR_VERSION } from '../../core/docs'
import pkg from '../../package.json'
import { type TestApp, forEachEngine, makeApp } from '../helpers'

// Issue 15 point 10: `/docs` works without internet. The reference UI comes from a pinned npm
// dependency, served by liveops itself; a browser that may reach nothing but this server renders it.

const CHROMIUM = '/usr/bin/chromium'
if (!existsSync(CHROMIUM))
  throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)`)
const BUNDLE = `${import.meta.dir}/../../node_modules/@scalar/api-reference/dist/browser/standalone.js`

forEachEngine((engine) => {
  let a: TestApp
  let base: string
  beforeAll(async () => {
    a = await makeApp(engine, { plugins: { games: {} } })
    base = a.listen()
  })
  afterAll(() => a.stop())

  test('the dependency is pinned exactly and the page names only this server', async () => {
    expect((pkg.dependencies as Record<string, string>)['@scalar/api-reference']).toBe(SCALAR_VERSION)
    const page = await (await fetch(`${base}/docs`)).text()
    const scripts = [...page.matchAll(/<script[^>]*\ssrc="([^"]+)"/g)].map((m) => m[1])
    expect(scripts).toEqual([SCALAR_ASSET])
    expect(page).not.toMatch(/https?:\/\/(cdn\.|unpkg|fonts\.)/)
    expect(page).toContain('"withDefaultFonts":false')
  })

  test('the bundle is served from the package, plain or gzipped, cacheable for a year', async () => {
    const plain = await fetch(`${base}${SCALAR_ASSET}`, { headers: { 'accept-encoding': 'identity' } })
    expect(plain.status).toBe(200)
    expect(plain.headers.get('content-type')).toContain('javascript')
    expect(plain.headers.get('cache-control')).toContain('immutable')
    const bytes = new Uint8Array(await plain.arrayBuffer())
    expect(bytes).toEqual(new Uint8Array(await Bun.file(BUNDLE).arrayBuffer()))
    const z = await fetch(`${base}${SCALAR_ASSET}`, {
      headers: { 'accept-encoding': 'gzip' },
      decompress: false,
    } as RequestInit)
    expect(z.headers.get('content-encoding')).toBe('gzip')
    const zipped = new Uint8Array(await z.arrayBuffer())
    expect(zipped.length).toBeLessThan(bytes.length / 2)
    expect(new Uint8Array(gunzipSync(zipped))).toEqual(bytes)
    expect((await fetch(`${base}/docs/assets/scalar-api-reference-0.0.1.js`)).status).toBe(404)
  })

  test('a browser that can reach only this server renders the reference, operations included', async () => {
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] })
    try {
      const page = await browser.newPage()
      const offBox: string[] = []
      await page.route('**/*', (route) => {
        const url = route.request().url()
        if (url.startsWith(base) || url.startsWith('data:') || url.startsWith('blob:'))
          return route.continue()
        offBox.push(url)
        return route.abort()
      })
      const errors: string[] = []
      page.on('pageerror', (e) => errors.push(String(e)))
      await page.goto(`${base}/docs`)
      await page
        .getByText('Readiness: 503 until every configured dependency answers')
        .first()
        .waitFor({ timeout: 30_000 })
      expect(await page.getByText('Open Group - games').count()).toBeGreaterThan(0)
      expect(errors).toEqual([])
      expect(offBox).toEqual([])
    } finally {
      await browser.close()
    }
  }, 60_000)
})

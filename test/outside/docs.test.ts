import { afterAll, beforeAll, expect, test } from 'bun:test'
import { existsSync } from 'node:fs'
import { gunzipSync } from 'node:zlib'
import { chromium } from 'playwright-core'
import { DOCS_POLICY, SCALAR_ASSET, SCALAR_VERSION } from '../../core/docs'
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

  test("the page and the document answer with the console's protective headers (audit L5)", async () => {
    for (const path of ['/docs', '/v3/api-docs']) {
      const r = await fetch(`${base}${path}`)
      expect(r.status, path).toBe(200)
      expect(r.headers.get('content-security-policy'), path).toBe(DOCS_POLICY)
      expect(r.headers.get('x-frame-options'), path).toBe('DENY')
      expect(r.headers.get('x-content-type-options'), path).toBe('nosniff')
      expect(r.headers.get('referrer-policy'), path).toBe('no-referrer')
    }
    expect(DOCS_POLICY).toContain("frame-ancestors 'none'")
    expect(DOCS_POLICY).not.toMatch(/script-src[^;]*'unsafe-(inline|eval)'/)
    const asset = await fetch(`${base}${SCALAR_ASSET}`)
    expect(asset.headers.get('x-content-type-options')).toBe('nosniff')
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
      // What the page's policy refused; Scalar's probe of `Function('')` is refused by design.
      const refused: string[] = []
      await page.exposeFunction('refused', (v: string) => refused.push(v))
      await page.addInitScript(() =>
        document.addEventListener('securitypolicyviolation', (e) =>
          (window as unknown as { refused(v: string): void }).refused(
            `${e.violatedDirective} ${e.blockedURI}`,
          ),
        ),
      )
      await page.goto(`${base}/docs`)
      await page
        .getByText('Readiness: 503 until every configured dependency answers')
        .first()
        .waitFor({ timeout: 30_000 })
      expect(await page.getByText('Open Group - games').count()).toBeGreaterThan(0)
      expect(errors).toEqual([])
      expect(offBox).toEqual([])
      expect(refused.filter((v) => v !== 'script-src eval')).toEqual([])
    } finally {
      await browser.close()
    }
  }, 60_000)
})

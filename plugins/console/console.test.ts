import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, makeApp } from '../../test/helpers'

/**
 * The console's serving (issue 37 point 1): the page at `/`, revalidated on every load, and its
 * assets named by content hash, cached for a year and gzipped. Served from the bundle Bun makes of
 * `console/` (the browser flows are in test/console/). No store is touched: SQLite is enough.
 */
describe('console serving', () => {
  let a: TestApp
  let page: string
  let assets: string[]
  beforeAll(async () => {
    a = await makeApp('sqlite', { plugins: { console: {} } })
    const res = await a.req('GET', '/')
    page = res.body
    assets = [...page.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1])
  })
  afterAll(() => a?.stop())

  test('GET / answers the page, never cached without revalidation, under a policy that allows only this origin', async () => {
    const res = await a.req('GET', '/')
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8')
    expect(res.headers.get('cache-control')).toBe('no-cache')
    const csp = res.headers.get('content-security-policy') ?? ''
    expect(csp).toContain("script-src 'self'")
    expect(csp).toContain("connect-src 'self'")
    expect(csp).toContain("frame-ancestors 'none'")
    expect(res.headers.get('x-content-type-options')).toBe('nosniff')
    expect(res.body).toContain('<div id="app">')
  })

  test('the page loads one script and one style sheet, both from /assets/, nothing from another host', () => {
    expect(assets.filter((p) => p.endsWith('.js'))).toHaveLength(1)
    expect(assets.filter((p) => p.endsWith('.css'))).toHaveLength(1)
    expect(page).not.toMatch(/(?:src|href)="(?:https?:)?\/\//)
  })

  test('assets are named by their content hash, cached for a year as immutable, and gzipped for clients that accept it', async () => {
    for (const path of assets) {
      const plain = await a.app.handle(new Request(`http://localhost${path}`))
      expect(plain.status).toBe(200)
      expect(plain.headers.get('cache-control')).toBe('public, max-age=31536000, immutable')
      expect(plain.headers.get('content-encoding')).toBeNull()
      const bytes = new Uint8Array(await plain.arrayBuffer())
      // The name carries the content's hash: another build of other bytes gets another name.
      expect(path).toMatch(/-[a-z0-9]{8}\.(js|css)$/)
      const zipped = await a.app.handle(
        new Request(`http://localhost${path}`, { headers: { 'accept-encoding': 'gzip, br' } }),
      )
      expect(zipped.headers.get('content-encoding')).toBe('gzip')
      expect(zipped.headers.get('vary')).toBe('Accept-Encoding')
      const z = new Uint8Array(await zipped.arrayBuffer())
      expect(z.byteLength).toBeLessThan(bytes.byteLength)
      expect(Bun.gunzipSync(z)).toEqual(bytes)
      expect(plain.headers.get('content-type')).toStartWith(
        path.endsWith('.js') ? 'text/javascript' : 'text/css',
      )
    }
  })

  test('an unknown asset is 404 with the API error body; the console routes stay out of the OpenAPI description', async () => {
    const res = await a.req('GET', '/assets/nope-12345678.js')
    expect(res.status).toBe(404)
    expect(res.body.error).toBe('not_found')
    expect(res.body.message).toContain('nope-12345678.js')
    const doc = (await a.req('GET', '/v3/api-docs')).body
    expect(Object.keys(doc.paths)).not.toContain('/')
    expect(Object.keys(doc.paths).some((p) => p.startsWith('/assets'))).toBe(false)
  })

  test('without the console plugin, / is the API 404', async () => {
    const bare = await makeApp('sqlite', { plugins: {} })
    try {
      expect((await bare.req('GET', '/')).status).toBe(404)
    } finally {
      await bare.stop()
    }
  })
})

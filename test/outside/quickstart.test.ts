import { afterAll, beforeAll, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import pkg from '../../package.json'
import { type TestApp, makeApp, until } from '../helpers'

/*
 * Issue 38 point 5: the quick start reaches ingestion. The README's "first event" lines are run
 * as written against a server with no signing secret configured: the secret comes from the API,
 * the SDK (imported by the package's own name) sends a signed event, analytics reads it back.
 */
const ROOT = join(import.meta.dir, '../..')
const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
const snippet = /### The first event[\s\S]*?```ts\n([\s\S]*?)```/.exec(readme)?.[1] ?? ''

let a: TestApp
let base: string
beforeAll(async () => {
  a = await makeApp('sqlite', {
    plugins: { games: {}, ingest: { purge_interval_minutes: 0 }, analytics: {} },
  })
  base = a.listen()
})
afterAll(() => a.stop())

test('Node >= 22 is stated and set in engines; the SDK is exported by the package', async () => {
  expect(pkg.engines.node).toBe('>=22')
  expect(readme).toContain('Node >= 22')
  const sdk = await import('liveops/sdk')
  expect(typeof sdk.LiveopsClient).toBe('function')
})

test("the README's first event, run as written, is read back from analytics", async () => {
  expect(snippet).toContain("from 'liveops/sdk'")
  const TOKEN = await a.token('developer')
  const SECRET = (await a.req('GET', '/api/v1/ingest/secret', { token: TOKEN })).body.data.secret
  expect(typeof SECRET).toBe('string')
  const admin = await a.token('admin')
  const GAME_ID = (
    await a.req('POST', '/api/games', {
      token: admin,
      body: {
        name: 'Star Miners',
        genre: 'STRATEGY',
        platforms: ['IOS'],
        timezone: 'UTC',
        defaultCurrency: 'EUR',
      },
    })
  ).body.id
  // The snippet's code lines (its curl comment aside), with this server's address.
  const code = snippet
    .split('\n')
    .filter((l) => !l.trim().startsWith('//'))
    .join('\n')
    .replace(
      "import { LiveopsClient } from 'liveops/sdk'",
      "const { LiveopsClient } = await import('liveops/sdk')",
    )
    .replaceAll('http://localhost:8080', base)
  const AsyncFunction = Object.getPrototypeOf(async () => undefined).constructor
  await new AsyncFunction('GAME_ID', 'SECRET', code)(GAME_ID, SECRET)
  const read = async () =>
    (await a.req('GET', `/api/v1/analytics/behavior/events?gameId=${GAME_ID}&env=prod`, { token: admin }))
      .body
  expect(await until(async () => JSON.stringify(await read()).includes('level_start'), 5000)).toBe(true)
})

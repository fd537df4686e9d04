import { afterAll, beforeAll, expect, test } from 'bun:test'
import { existsSync } from 'node:fs'
import { type Browser, chromium } from 'playwright-core'
import { type TestApp, makeApp } from '../../test/helpers'

// In-app messages as a browser meets them: EventSource (which cannot send headers, hence
// ?token=) on an operator page hears each new message. `.ci/run` installs Debian's chromium.
const CHROMIUM = '/usr/bin/chromium'
if (!existsSync(CHROMIUM))
  throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)`)

let browser: Browser
let a: TestApp
beforeAll(async () => {
  a = await makeApp('sqlite', { plugins: { notify: {}, site: {} } })
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] })
})
afterAll(async () => {
  await browser?.close()
  await a?.stop()
})

test('an EventSource in a page receives new in-app messages as they are stored', async () => {
  const base = a.listen()
  const token = await a.token('viewer')
  const page = await browser.newPage()
  try {
    // Same origin as the API: the page an operator console would be.
    await page.goto(`${base}/healthz`)
    await page.evaluate((t) => {
      const w = window as unknown as { got: unknown[]; opened: boolean }
      w.got = []
      const es = new EventSource(`/api/v1/site/messages/stream?token=${t}`)
      es.onopen = () => {
        w.opened = true
      }
      es.addEventListener('message', (e) => w.got.push(JSON.parse((e as MessageEvent).data)))
    }, token)
    await page.waitForFunction(() => (window as unknown as { opened?: boolean }).opened === true, null, {
      timeout: 10_000,
    })
    await a.bus.emit('alert.fired', {
      alert_id: 'refunds-1',
      source: 'ops-alerts',
      level: 'warning',
      title: 'Refunds above normal',
      body: 'svc_refunds is 31 (> 20)',
      params: {},
      at: new Date().toISOString(),
    })
    await page.waitForFunction(() => (window as unknown as { got: unknown[] }).got.length > 0, null, {
      timeout: 10_000,
    })
    const got = await page.evaluate(() => (window as unknown as { got: unknown[] }).got)
    expect(got[0]).toMatchObject({ event: 'alert.fired', title: 'Refunds above normal', read: false })
  } finally {
    await page.close()
  }
})

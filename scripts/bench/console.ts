#!/usr/bin/env bun
/**
 * The console's benchmark (issue 37), against a real server process and headless Chromium:
 *
 *   bun scripts/bench/console.ts [--part=load,realtime,overview] [--runs=7]
 *     [--events=10000000] [--users=200000] [--days=30]            (overview)
 *     [--clients=1000] [--seconds=20] [--warmup=10] [--rounds=2]  (realtime)
 *
 * load: the first load of the console over loopback in a fresh browser profile (nothing cached),
 * from navigation to the sign-in form ready for input, median of --runs; and the JavaScript it
 * loads, gzipped as served. Targets: <= 1 s, <= 250 KB.
 * overview: the analytics overview page over --events generated events (written into the
 * server's own store with ingest's writer and the analytics rollup, the server stopped), from
 * the page's address changing to its eight KPIs and its chart drawn. Target: <= 1.5 s.
 * realtime: signed ingestion (the ingestion benchmark's load, 16 connections) in windows without
 * and with --clients realtime streams opened as the console's realtime page opens them (fetch,
 * Authorization header) plus the page itself in Chromium; the ratio of the medians. Target: the
 * ingestion within 10% of its figure without them (>= 0.9).
 * Every figure is printed with the machine's load average (`uptime`) at the time.
 */
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { type Browser, chromium } from 'playwright-core'
import { openDb } from '../../core/db'
import { createLogger } from '../../core/log'
import { DAY, floorTo } from '../../plugins/analytics/lib/time'
import { derive } from '../../plugins/analytics/store/testing'
import { PersistThread } from '../../plugins/ingest/persist/persist-thread'
import { COMMITS_IN_FLIGHT, GroupWriter } from '../../plugins/ingest/persist/writer'
import { CHROMIUM, CHROMIUM_ARGS } from '../../test/console/driver'
import { type Running, startServer } from '../../test/process'
import { analyticsBatch } from './analytics-events'
import { shapes } from './events'
import { benchConfig, bootstrap, load, summary } from './ingest-load'
import { arg, median, tempDir } from './lib'

const PASSWORD = 'bench-password'
const runs = Number(arg('runs', '7'))
const parts = arg('part', 'load,realtime,overview').split(',')

const uptime = () =>
  Bun.spawnSync(['uptime'])
    .stdout.toString()
    .trim()
    .replace(/^.*load average: /, 'load ')
const round = (ms: number) => Math.round(ms)

async function server(dir: string, analytics = '{}'): Promise<Running> {
  const config = await benchConfig(dir, `analytics: ${analytics}, experiments: {}, console: {}`)
  return startServer(
    [process.execPath, 'core/main.ts', '--config', config],
    { ADMIN_PASSWORD: PASSWORD, JWT_SECRET: 'bench-jwt-secret-0001' },
    { timeoutMs: 120_000 },
  )
}

/** Runs `fn` with a fresh data directory, removed afterwards whatever happens. */
async function inDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = tempDir('liveops-console-bench-')
  try {
    return await fn(dir)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

async function stop(s: Running): Promise<void> {
  s.proc.kill('SIGTERM')
  await s.proc.exited
}

/** A fresh profile (no cache), signed in as the admin, the games page shown. */
async function signedIn(browser: Browser, base: string) {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } })
  const page = await ctx.newPage()
  await page.goto(`${base}/`)
  await page.getByLabel('Email').fill('admin@localhost')
  await page.getByLabel('Password').fill(PASSWORD)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByRole('heading', { level: 1, name: 'Games' }).waitFor()
  return { ctx, page }
}

async function firstLoad(browser: Browser, base: string) {
  // The server bundles the console at its first request: that is not the browser's first load.
  await fetch(`${base}/`)
  const html = await (await fetch(`${base}/`)).text()
  let jsGzip = 0
  let jsRaw = 0
  for (const m of html.matchAll(/src="(\/assets\/[^"]+\.js)"/g)) {
    jsGzip += (
      await (
        await fetch(`${base}${m[1]}`, { headers: { 'accept-encoding': 'gzip' }, decompress: false })
      ).arrayBuffer()
    ).byteLength
    jsRaw += (
      await (await fetch(`${base}${m[1]}`, { headers: { 'accept-encoding': 'identity' } })).arrayBuffer()
    ).byteLength
  }
  const times: number[] = []
  for (let i = 0; i < runs; i++) {
    const ctx = await browser.newContext()
    const page = await ctx.newPage()
    await page.goto(`${base}/`, { waitUntil: 'commit' })
    await page.waitForSelector('form[aria-label="Sign in"] button[type="submit"]:enabled')
    // performance.now() counts from the navigation's start.
    times.push(await page.evaluate(() => performance.now()))
    await ctx.close()
  }
  return {
    part: 'first load to an interactive sign-in form, fresh profile, loopback',
    medianMs: round(median(times)),
    maxMs: round(Math.max(...times)),
    runsMs: times.map(round),
    targetMs: 1000,
    jsGzipKB: +(jsGzip / 1024).toFixed(1),
    jsKB: +(jsRaw / 1024).toFixed(1),
    targetJsGzipKB: 250,
    met: median(times) <= 1000 && jsGzip <= 250 * 1024,
    load: uptime(),
  }
}

/** Writes `total` generated events for `gameId` into the stopped server's SQLite store, as the server writes them. */
async function fill(file: string, dir: string, gameId: string, total: number, users: number, days: number) {
  const db = openDb(file, dir)
  const thread = new PersistThread(db.location!, COMMITS_IN_FLIGHT[db.dialect])
  const writer = new GroupWriter(
    db,
    createLogger({ level: 'error', format: 'json', sensitive_fields: [] } as never),
    (rows) => thread.persist(rows),
  )
  const perCommit = 5000
  const start = floorTo(Date.now(), DAY) - (days - 1) * DAY
  const order = { n: 0 }
  const t0 = performance.now()
  const inFlight: Promise<void>[] = []
  for (let written = 0; written < total; written += perCommit) {
    inFlight.push(
      writer.write(
        analyticsBatch(
          { gameId, users, total, days, perCommit },
          start + (written / total) * days * DAY,
          order,
        ),
      ),
    )
    if (inFlight.length >= 4) await inFlight.shift()
    if (written % 1_000_000 === 0 && written)
      console.error(`${written} events in ${round((performance.now() - t0) / 1000)} s`)
  }
  await Promise.all(inFlight)
  await writer.idle()
  await derive(db)
  await thread.close()
  await db.close()
  return Math.round(total / ((performance.now() - t0) / 1000))
}

async function overview(browser: Browser) {
  const total = Number(arg('events', '10000000'))
  return inDir(async (dir) => {
    let s = await server(dir)
    const { gameId } = await bootstrap(s.base)
    await stop(s)
    const eventsPerSec = await fill(
      join(dir, 'liveops.sqlite'),
      dir,
      gameId,
      total,
      Number(arg('users', '200000')),
      Number(arg('days', '30')),
    )
    s = await server(dir)
    try {
      const { ctx, page } = await signedIn(browser, s.base)
      const times: number[] = []
      for (let i = 0; i <= runs; i++) {
        await page.evaluate(() => {
          location.hash = '#/games'
        })
        await page.getByRole('heading', { level: 1, name: 'Games' }).waitFor()
        await page.evaluate(() => {
          ;(window as unknown as { t0: number }).t0 = performance.now()
          location.hash = '#/analytics/overview'
        })
        await page.waitForFunction(
          () =>
            document.querySelectorAll('.kpi-value').length >= 8 &&
            !!document.querySelector('.chart-box canvas'),
          undefined,
          { timeout: 60_000, polling: 'raf' },
        )
        times.push(await page.evaluate(() => performance.now() - (window as unknown as { t0: number }).t0))
      }
      const mau = await page
        .locator('.kpi')
        .filter({ hasText: 'Monthly active users' })
        .locator('.kpi-value')
        .textContent()
      await ctx.close()
      return {
        part: `analytics overview page over ${total} events, address to KPIs and chart drawn`,
        events: total,
        loadedEventsPerSec: eventsPerSec,
        shownMau: mau,
        firstMs: round(times[0]),
        medianMs: round(median(times.slice(1))),
        maxMs: round(Math.max(...times)),
        targetMs: 1500,
        met: Math.max(times[0], median(times.slice(1))) <= 1500,
        load: uptime(),
      }
    } finally {
      await stop(s)
    }
  })
}

/** The streams, in a child process (the realtime benchmark's client role): as the console's page opens them. */
async function streams(base: string, path: string, token: string, n: number) {
  const proc = Bun.spawn(
    [
      process.execPath,
      'scripts/bench/analytics-realtime.ts',
      '--role=clients',
      `--clients=${n}`,
      `--base=${base}`,
      `--path=${path}`,
      `--token=${token}`,
    ],
    { stdout: 'pipe', stderr: 'inherit' },
  )
  let report = { ok: 0, withSnapshot: 0, snapshots: 0, lost: 0 }
  void (async () => {
    let buf = ''
    const reader = proc.stdout.pipeThrough(new TextDecoderStream()).getReader()
    for (;;) {
      const { done, value } = await reader.read()
      if (done) return
      buf += value
      const lines = buf.split('\n')
      buf = lines.pop() ?? ''
      for (const l of lines) if (l.startsWith('{')) report = JSON.parse(l)
    }
  })()
  const deadline = Date.now() + 120_000
  while (report.withSnapshot < n && Date.now() < deadline) await Bun.sleep(250)
  if (report.withSnapshot < n) throw new Error(`streams did not all connect: ${JSON.stringify(report)}`)
  return {
    report: () => report,
    close: () => {
      proc.kill()
      return proc.exited
    },
  }
}

async function realtime(browser: Browser) {
  const clients = Number(arg('clients', '1000'))
  const seconds = Number(arg('seconds', '20'))
  return inDir(async (dir) => {
    const s = await server(
      dir,
      `{ realtime: { max_clients: ${clients + 100}, max_clients_per_principal: ${clients + 100} } }`,
    )
    try {
      const { token, gameId } = await bootstrap(s.base)
      const pool = shapes(gameId)
      const window = async () => summary(await load(s.base, gameId, 100, seconds, 16, undefined, true, pool))
      await load(s.base, gameId, 100, Number(arg('warmup', '10')), 16, undefined, true, pool)
      const without: Array<ReturnType<typeof summary>> = []
      const during: Array<
        ReturnType<typeof summary> & { pageUpdates: number; streamsOpen: number; lost: number }
      > = []
      for (let r = 0; r < Number(arg('rounds', '2')); r++) {
        without.push(await window())
        const child = await streams(
          s.base,
          `/api/v1/analytics/realtime?gameId=${gameId}&env=prod`,
          token,
          clients - 1,
        )
        const { ctx, page } = await signedIn(browser, s.base)
        await page.evaluate(() => {
          location.hash = '#/analytics/realtime'
        })
        await page.getByText(/^Live, updated/).waitFor({ timeout: 30_000 })
        const seen = new Set<string>()
        const watch = setInterval(
          async () =>
            seen.add(
              (await page
                .locator('.live')
                .textContent()
                .catch(() => '')) ?? '',
            ),
          1000,
        )
        const w = await window()
        clearInterval(watch)
        const rep = child.report()
        during.push({ ...w, pageUpdates: seen.size, streamsOpen: rep.ok + 1, lost: rep.lost })
        await ctx.close()
        await child.close()
      }
      without.push(await window())
      const base = median(without.map((x) => x.eventsPerSec))
      const withStreams = median(during.map((x) => x.eventsPerSec))
      return {
        part: `signed ingestion with ${clients} realtime streams (the console page among them) against without`,
        medianEventsPerSec: { without: base, with: withStreams },
        ratio: +(withStreams / base).toFixed(3),
        target: 0.9,
        met: withStreams / base >= 0.9,
        windows: { without, with: during },
        load: uptime(),
      }
    } finally {
      await stop(s)
    }
  })
}

const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS })
try {
  if (parts.includes('load')) {
    await inDir(async (dir) => {
      const s = await server(dir)
      try {
        console.log(JSON.stringify(await firstLoad(browser, s.base)))
      } finally {
        await stop(s)
      }
    })
  }
  if (parts.includes('realtime')) console.log(JSON.stringify(await realtime(browser)))
  if (parts.includes('overview')) console.log(JSON.stringify(await overview(browser)))
} finally {
  await browser.close()
}

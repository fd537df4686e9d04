import type { Browser } from 'playwright-core'
import { plugins as allPlugins } from '../../plugins'
import { type Engine, type TestApp, makeApp } from '../helpers'
import { ConsoleTab } from './driver'

/** A flow's time limit: a few pages of clicks on a shared two-core machine. */
export const FLOW = 90_000

export const SECRET = 'console-test-signing-secret'
export const AGENT_TOKEN = 'console-test-agent-token'

/** A webhook receiver: the first delivery fails with 500 (so the logs show a retry), the rest succeed. */
export function webhookSink() {
  let n = 0
  const received: Array<{ body: string; key: string | null }> = []
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch: async (r) => {
      received.push({ body: await r.text(), key: r.headers.get('x-api-key') })
      n++
      return new Response(n === 1 ? 'busy' : 'ok', { status: n === 1 ? 500 : 200 })
    },
  })
  return { url: `http://127.0.0.1:${server.port}/hook`, received, stop: () => server.stop(true) }
}

/** What the flows share, in the order they run: one app, one tab, the ids the earlier flows made. */
export interface World {
  engine: Engine
  a: TestApp
  base: string
  tab: ConsoleTab
  sink: ReturnType<typeof webhookSink>
  gameId?: string
  experimentId?: string
}

/**
 * The app the console is driven against: every plugin, ingestion and agents with a secret, a
 * realtime tick of half a second and notification retries in tenths of a second, so the pages
 * show their data at once.
 */
export async function consoleWorld(engine: Engine, browser: Browser): Promise<World> {
  const settings: Record<string, unknown> = {
    ingest: { signing_secret: SECRET },
    agents: { token: AGENT_TOKEN },
    analytics: { realtime: { interval_ms: 500 } },
    notify: { queue: { poll_ms: 50 }, retry: { max_attempts: 4, base_ms: 100, max_ms: 300 } },
    backups: { schedule_interval_s: 0 },
    certificates: { check_interval_s: 0 },
  }
  const a = await makeApp(engine, {
    plugins: Object.fromEntries(Object.keys(allPlugins).map((n) => [n, settings[n] ?? {}])),
  })
  for (const role of ['operator', 'analyst', 'developer', 'viewer']) await a.token(role)
  const base = a.listen()
  return { engine, a, base, tab: await ConsoleTab.open(browser, base, engine), sink: webhookSink() }
}

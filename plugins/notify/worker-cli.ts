import { hostname } from 'node:os'
import { Value } from '@sinclair/typebox/value'
import { createLogger } from '../../core/log'
import { Outbound, OutboundPolicy } from '../../core/outbound'
import {
  type Provider,
  type ProviderDefinition,
  ProviderRegistry,
  type SendResult,
  loadProviderModule,
} from '../../core/plugin'
import { smtpProvider } from '../smtp-provider'
import { webhookProvider } from '../webhook-provider'
import { logProvider } from './log-provider'
import type { RemoteChannel, ServerMessage, WorkerMessage } from './workers'

const USAGE = `usage: liveops worker --server URL --token TOKEN [--id ID] [--capabilities webhook,smtp,log]
                      [--module ./ext/sms.ts ...] [--concurrency N]

Connects to a liveops server's worker endpoint (plugins.notify.workers.remote), advertises the
provider types it can send, heartbeats, sends the deliveries it receives and reports results.
TOKEN is the server's plugins.notify.workers.remote.token (NOTIFY_WORKER_TOKEN), also read from
that variable when --token is not given; no user or application token connects.
--module loads a third-party provider file (its default export made by defineProvider), as the
server does for a channel's \`module:\`; its type joins the capabilities. Repeatable.`

export interface WorkerOptions {
  server: string
  token: string
  id: string
  capabilities: string[]
  concurrency: number
  /** Third-party provider definitions (loaded from `--module` files) beside the built-in ones. */
  providers?: ProviderDefinition[]
}

/** Runs one remote worker until `stop()`; reconnects with backoff when the connection drops. */
export function runWorker(o: WorkerOptions) {
  const log = createLogger({
    level: 'info',
    format: 'json',
    max_size: 100,
    max_backups: 0,
    max_age: 0,
    sensitive_fields: ['password', 'token', 'authorization'],
  }).child('worker')
  const registry = new ProviderRegistry()
  for (const def of [logProvider, webhookProvider, smtpProvider, ...(o.providers ?? [])])
    registry.register(def)
  const providers = new Map<string, Provider>()
  const url = `${o.server.replace(/^http/, 'ws').replace(/\/$/, '')}/api/v1/workers/connect`
  let ws: WebSocket | undefined
  let beat: Timer | undefined
  let stopped = false
  let retryMs = 500
  // The server's policy arrives with its welcome; until then nothing is sent anyway.
  let outbound = new Outbound(new OutboundPolicy({ allow: [], deny: [] }))

  async function provider(ch: RemoteChannel): Promise<Provider> {
    const key = `${ch.name}\n${ch.type}\n${ch.trusted}\n${JSON.stringify(ch.config)}`
    let p = providers.get(key)
    if (p) return p
    const def = registry.get(ch.type)
    if (!def) throw new Error(`this worker cannot send provider type '${ch.type}'`)
    p = await def.create(Value.Default(def.config, Value.Clone(ch.config)) as never, {
      log,
      outbound: ch.trusted ? outbound.trusted : outbound,
    })
    providers.set(key, p)
    return p
  }

  async function deliver(m: Extract<ServerMessage, { type: 'delivery' }>) {
    let r: SendResult
    try {
      r = await (await provider(m.channel)).send(m.delivery)
    } catch (e) {
      r = { ok: false, retryable: true, error: (e as Error).message }
    }
    const reply: WorkerMessage = r.ok
      ? { type: 'result', id: m.delivery.id, ok: true }
      : { type: 'result', id: m.delivery.id, ok: false, retryable: r.retryable, error: r.error }
    ws?.send(JSON.stringify(reply))
  }

  function connect() {
    // Bun's WebSocket client accepts headers, so the token never travels in the URL.
    const sock = new WebSocket(url, {
      headers: { authorization: `Bearer ${o.token}` },
    } as unknown as string[])
    ws = sock
    sock.onopen = () => {
      retryMs = 500
      const hello: WorkerMessage = {
        type: 'hello',
        worker_id: o.id,
        capabilities: o.capabilities,
        concurrency: o.concurrency,
      }
      sock.send(JSON.stringify(hello))
    }
    sock.onmessage = (ev) => {
      const m = JSON.parse(String(ev.data)) as ServerMessage
      if (m.type === 'welcome') {
        if (JSON.stringify(m.outbound) !== JSON.stringify(outbound.policy?.settings)) {
          outbound = new Outbound(new OutboundPolicy(m.outbound ?? { allow: [], deny: [] }))
          providers.clear()
        }
        log.info('connected', { server: url, worker_id: o.id, capabilities: o.capabilities })
        clearInterval(beat)
        beat = setInterval(
          () => sock.readyState === WebSocket.OPEN && sock.send(JSON.stringify({ type: 'heartbeat' })),
          m.heartbeat_s * 1000,
        )
      } else if (m.type === 'delivery') void deliver(m)
    }
    sock.onclose = (ev) => {
      clearInterval(beat)
      if (stopped) return
      log.warn('disconnected; reconnecting', { code: ev.code, reason: ev.reason, in_ms: retryMs })
      setTimeout(connect, retryMs)
      retryMs = Math.min(30_000, retryMs * 2)
    }
  }
  connect()
  return {
    stop() {
      stopped = true
      clearInterval(beat)
      ws?.close()
    },
  }
}

/** `liveops worker ...` */
export async function workerCommand(args: string[]): Promise<void> {
  const flag = (name: string) => {
    const i = args.indexOf(name)
    return i >= 0 ? args[i + 1] : undefined
  }
  const modules = args.flatMap((a, i) => (a === '--module' && args[i + 1] ? [args[i + 1]] : []))
  const server = flag('--server')
  const token = flag('--token') ?? process.env.NOTIFY_WORKER_TOKEN ?? process.env.LIVEOPS_WORKER_TOKEN
  if (!server || !token || args.includes('--help')) {
    console.error(USAGE)
    process.exit(2)
  }
  const extra: ProviderDefinition[] = []
  for (const m of modules) {
    try {
      extra.push(await loadProviderModule(m))
    } catch (e) {
      console.error(`--module: ${(e as Error).message}`)
      process.exit(2)
    }
  }
  const w = runWorker({
    server,
    token,
    id: flag('--id') ?? `${hostname()}-${process.pid}`,
    capabilities: [
      ...(flag('--capabilities') ?? 'webhook,smtp,log')
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
      ...extra.map((d) => d.type),
    ],
    providers: extra,
    concurrency: Number(flag('--concurrency') ?? 32),
  })
  const quit = () => {
    w.stop()
    process.exit(0)
  }
  process.on('SIGINT', quit)
  process.on('SIGTERM', quit)
  await new Promise(() => undefined)
}

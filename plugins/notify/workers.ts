import { createHash, timingSafeEqual } from 'node:crypto'
import type { Server, ServerWebSocket } from 'bun'
import { Forbidden, HttpError, Unauthorized } from '../../core/http'
import type { Logger } from '../../core/log'
import type { OutboundSettings } from '../../core/outbound'
import type { Delivery, SendResult } from '../../core/plugin'

/**
 * The wire protocol between the server and `liveops worker`, JSON text frames:
 *   worker -> server  {type:'hello', worker_id, capabilities, concurrency}
 *                     {type:'heartbeat'}
 *                     {type:'result', id, ok, retryable?, error?}
 *   server -> worker  {type:'welcome', heartbeat_s, outbound: {allow, deny}}
 *                     {type:'delivery', delivery, channel: {name, type, config, trusted}}
 * A worker sends under the server's outbound policy, except for channels the YAML configures
 * (`trusted`).
 */
export type WorkerMessage =
  | { type: 'hello'; worker_id: string; capabilities: string[]; concurrency?: number }
  | { type: 'heartbeat' }
  | { type: 'result'; id: string; ok: boolean; retryable?: boolean; error?: string }

export type ServerMessage =
  | { type: 'welcome'; heartbeat_s: number; outbound: OutboundSettings }
  | { type: 'delivery'; delivery: Delivery; channel: RemoteChannel }

/** What a worker needs of a channel: its settings, and whether the YAML wrote them (trusted). */
export interface RemoteChannel {
  name: string
  type: string
  config: Record<string, unknown>
  trusted: boolean
}

interface Conn {
  worker?: RemoteWorker
}

interface RemoteWorker {
  id: string
  capabilities: string[]
  concurrency: number
  connectedAt: number
  lastHeartbeat: number
  closed: boolean
  ws: ServerWebSocket<Conn>
  inflight: Map<string, { resolve: (r: SendResult) => void; timer: Timer }>
}

export interface HubOptions {
  host: string
  port: number
  heartbeatS: number
  missedHeartbeats: number
  resultTimeoutMs: number
  /** The server's outbound policy, which workers apply to channels from the API. */
  outbound: OutboundSettings
  log: Logger
  /** Checks the connecting worker's credentials; throws an HttpError to refuse. */
  authenticate(headers: Record<string, string | undefined>): void
  /** A worker said hello or freed capacity: the dispatcher may hand out more. */
  onCapacity(): void
}

/**
 * Remote workers: separate processes that connect by WebSocket, say which provider types they
 * can send, heartbeat, receive deliveries and report results. A worker that disconnects or stays
 * silent fails its in-flight deliveries as retryable, so the queue re-delivers them.
 */
/** Workers listed at once (online, and offline ones kept for the hour): past it a new one is refused. */
export const MAX_WORKERS = 1_000
/** A worker message's largest frame: hellos, heartbeats and results are a few hundred bytes. */
export const MAX_FRAME = 64 * 1024
/** A worker id, and each capability, at most this many characters; at most MAX_CAPABILITIES of them. */
const MAX_NAME = 128
const MAX_CAPABILITIES = 64
/** A failure a worker reports is kept to this many characters in the delivery's log. */
const MAX_ERROR = 2_000
/**
 * Refused connection attempts an address may make a minute (a wrong token, or one in the URL)
 * before it is answered 429 unchecked.
 */
const FAILURES_PER_MINUTE = 20

const TOKEN_IN_URL =
  'a remote worker sends notify.workers.remote.token in the Authorization: Bearer header, never in the URL (?token=), which proxies and access logs keep'

const name = (v: unknown): v is string => typeof v === 'string' && v.length > 0 && v.length <= MAX_NAME

export function workerHub(opts: HubOptions) {
  const workers = new Map<string, RemoteWorker>()
  /** Refused attempts by address in the current minute: guessing the token is bounded, and logged once a minute. */
  let failures = new Map<string, number>()
  let server: Server<Conn> | undefined
  const staleMs = () => opts.heartbeatS * 1000 * opts.missedHeartbeats
  const online = (w: RemoteWorker) => !w.closed && Date.now() - w.lastHeartbeat <= staleMs()

  function drop(w: RemoteWorker, reason: string) {
    w.closed = true
    for (const [, f] of w.inflight) {
      clearTimeout(f.timer)
      f.resolve({ ok: false, retryable: true, error: `worker ${w.id}: ${reason}` })
    }
    w.inflight.clear()
  }

  // Offline workers stay listed for an hour so operators can see what went away.
  const sweeper = setInterval(
    () => {
      const now = Date.now()
      for (const [id, w] of workers) {
        if (!w.closed && now - w.lastHeartbeat > staleMs()) {
          opts.log.warn('worker missed its heartbeats', { worker_id: id })
          drop(w, 'missed heartbeats')
          w.ws.close(4000, 'missed heartbeats')
        }
        if (w.closed && now - w.lastHeartbeat > 3_600_000) workers.delete(id)
      }
      if (now - failuresSince >= 60_000) {
        failures = new Map()
        failuresSince = now
      }
    },
    Math.max(50, (opts.heartbeatS * 1000) / 2),
  )
  sweeper.unref?.()
  let failuresSince = Date.now()

  /** Room for a new worker id: the offline entries kept longest go first; false when all are online. */
  function room(): boolean {
    if (workers.size < MAX_WORKERS) return true
    for (const [id, w] of workers)
      if (w.closed) {
        workers.delete(id)
        return true
      }
    return false
  }

  /**
   * A worker's frame. Anything but the protocol's messages closes that connection (4400), never
   * more: a `null`, a capability or an error that is no string had thrown out of the handler and
   * ended the whole process (audit 19b).
   */
  function onMessage(ws: ServerWebSocket<Conn>, text: string) {
    try {
      const msg = JSON.parse(text) as unknown
      if (!msg || typeof msg !== 'object' || Array.isArray(msg))
        return ws.close(4400, 'a message is a JSON object')
      handle(ws, msg as WorkerMessage)
    } catch (e) {
      opts.log.warn('worker message refused', { error: String(e).slice(0, 200) })
      ws.close(4400, 'malformed message')
    }
  }

  function handle(ws: ServerWebSocket<Conn>, msg: WorkerMessage) {
    const w = ws.data.worker
    if (msg.type === 'hello') {
      // One worker a connection: hellos repeated on one had filled the list (100,000 in 1.3 s).
      if (w) return ws.close(4400, 'one hello per connection')
      const caps = msg.capabilities as unknown
      if (!name(msg.worker_id) || !Array.isArray(caps) || caps.length > MAX_CAPABILITIES || !caps.every(name))
        return ws.close(
          4400,
          `hello needs worker_id and capabilities (at most ${MAX_CAPABILITIES}, each a text of 1-${MAX_NAME} characters)`,
        )
      const prior = workers.get(msg.worker_id)
      if (prior && !prior.closed) drop(prior, 'replaced by a new connection')
      if (!prior && !room()) return ws.close(4429, `${MAX_WORKERS} workers are connected`)
      const now = Date.now()
      const worker: RemoteWorker = {
        id: msg.worker_id,
        capabilities: caps,
        concurrency: Math.max(
          1,
          Math.min(1024, typeof msg.concurrency === 'number' ? Math.trunc(msg.concurrency) || 16 : 16),
        ),
        connectedAt: now,
        lastHeartbeat: now,
        closed: false,
        ws,
        inflight: new Map(),
      }
      ws.data.worker = worker
      workers.set(worker.id, worker)
      opts.log.info('worker connected', { worker_id: worker.id, capabilities: worker.capabilities })
      send(ws, { type: 'welcome', heartbeat_s: opts.heartbeatS, outbound: opts.outbound })
      opts.onCapacity()
      return
    }
    if (!w) return ws.close(4400, 'say hello first')
    w.lastHeartbeat = Date.now()
    if (msg.type === 'result') {
      if (typeof msg.id !== 'string') return
      const f = w.inflight.get(msg.id)
      if (!f) return
      clearTimeout(f.timer)
      w.inflight.delete(msg.id)
      f.resolve(
        msg.ok
          ? { ok: true }
          : {
              ok: false,
              retryable: msg.retryable !== false,
              // A text, cut: 8 MB errors had gone whole into the delivery and its attempts.
              error:
                typeof msg.error === 'string' ? msg.error.slice(0, MAX_ERROR) : 'worker reported a failure',
            },
      )
      opts.onCapacity()
    }
  }

  const send = (ws: ServerWebSocket<Conn>, m: ServerMessage) => ws.send(JSON.stringify(m))

  return {
    start() {
      server = Bun.serve<Conn>({
        hostname: opts.host,
        port: opts.port,
        async fetch(req, srv) {
          const url = new URL(req.url)
          if (url.pathname !== '/api/v1/workers/connect') return new Response('not found', { status: 404 })
          const headers: Record<string, string | undefined> = {}
          req.headers.forEach((v, k) => {
            headers[k] = v
          })
          const address = srv.requestIP(req)?.address ?? 'unknown'
          const refused = failures.get(address) ?? 0
          if (refused >= FAILURES_PER_MINUTE)
            return Response.json(
              {
                code: 429,
                message: 'too many refused attempts from this address: retry in a minute',
                data: null,
              },
              { status: 429, headers: { 'retry-after': '60' } },
            )
          try {
            // Refused whatever the header says: a URL lands in proxy and access logs, and this
            // token receives every channel's secrets (it had been taken from `?token=`).
            if (url.searchParams.has('token')) throw new Unauthorized(TOKEN_IN_URL)
            opts.authenticate(headers)
            if (srv.upgrade(req, { data: {} })) return undefined
            return new Response('expected a WebSocket upgrade', { status: 426 })
          } catch (e) {
            if (e instanceof Unauthorized) {
              failures.set(address, refused + 1)
              if (!refused)
                opts.log.warn('worker connection refused: wrong token', {
                  address,
                  ...(url.searchParams.has('token') ? { reason: 'token in the URL' } : {}),
                })
            }
            const status = e instanceof HttpError ? e.status : 500
            return Response.json({ code: status, message: (e as Error).message, data: null }, { status })
          }
        },
        websocket: {
          maxPayloadLength: MAX_FRAME,
          message: (ws, m) => onMessage(ws, typeof m === 'string' ? m : new TextDecoder().decode(m)),
          close(ws) {
            const w = ws.data.worker
            if (w && !w.closed) {
              opts.log.info('worker disconnected', { worker_id: w.id })
              drop(w, 'disconnected')
            }
          },
        },
      })
      return server.port
    },

    async stop() {
      clearInterval(sweeper)
      for (const w of workers.values()) if (!w.closed) drop(w, 'server stopping')
      server?.stop(true)
    },

    /** Free sends across online workers able to send this provider type. */
    free(type: string): number {
      let n = 0
      for (const w of workers.values())
        if (online(w) && w.capabilities.includes(type)) n += Math.max(0, w.concurrency - w.inflight.size)
      return n
    },

    /** Hands a delivery to the least busy capable worker; undefined when none has room. */
    dispatch(
      delivery: Delivery,
      channel: RemoteChannel,
    ): { worker: string; result: Promise<SendResult> } | undefined {
      let best: RemoteWorker | undefined
      for (const w of workers.values())
        if (
          online(w) &&
          w.capabilities.includes(channel.type) &&
          w.inflight.size < w.concurrency &&
          (!best || w.inflight.size < best.inflight.size)
        )
          best = w
      if (!best) return undefined
      const w = best
      const result = new Promise<SendResult>((resolve) => {
        const timer = setTimeout(() => {
          w.inflight.delete(delivery.id)
          resolve({
            ok: false,
            retryable: true,
            error: `worker ${w.id}: no result within ${opts.resultTimeoutMs} ms`,
          })
        }, opts.resultTimeoutMs)
        w.inflight.set(delivery.id, { resolve, timer })
      })
      send(w.ws, { type: 'delivery', delivery, channel })
      return { worker: w.id, result }
    },

    list() {
      const rows = [...workers.values()].map((w) => ({
        worker_id: w.id,
        mode: 'remote' as const,
        capabilities: w.capabilities,
        concurrency: w.concurrency,
        in_flight: w.inflight.size,
        connected_at: new Date(w.connectedAt).toISOString(),
        last_heartbeat: new Date(w.lastHeartbeat).toISOString(),
        status: online(w) ? ('online' as const) : ('offline' as const),
      }))
      return { count: rows.length, workers: rows }
    },

    get port() {
      return server?.port
    },
  }
}
export type WorkerHub = ReturnType<typeof workerHub>

/**
 * The check of a connecting worker: its `Authorization: Bearer` token must be the configured
 * `notify.workers.remote.token`, compared in constant time. A token in the URL (`?token=`) is
 * refused before this check, the right one too (the hub's fetch): URLs are kept by proxies and
 * access logs. Deliveries carry the channels' secrets
 * unmasked, which the API shows no one (an operator's or a `config` token's connection read a
 * YAML-only header in clear, sixteenth session's audit): the worker's credential is the
 * configuration's, and changing it (then restarting) is how a worker is revoked.
 */
export function workerToken(expected: string): (headers: Record<string, string | undefined>) => void {
  const want = createHash('sha256').update(expected).digest()
  return (headers) => {
    if (!expected)
      throw new Forbidden(
        'remote workers connect with notify.workers.remote.token (env NOTIFY_WORKER_TOKEN), which is not set',
      )
    const given = /^Bearer\s+(\S+)$/i.exec(headers.authorization ?? '')?.[1]
    if (!given || !timingSafeEqual(createHash('sha256').update(given).digest(), want))
      throw new Unauthorized('a remote worker sends notify.workers.remote.token as its Bearer token')
  }
}

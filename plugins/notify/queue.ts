import { fromJson } from '../../core/db'
import type { Logger } from '../../core/log'
import type { Metrics } from '../../core/metrics'
import type { Delivery, SendResult } from '../../core/plugin'
import type { ChannelManager, Slot } from './channels'
import type { NotifyConfig } from './schema'
import type { DeliveryRow, QueueStore } from './store'
import type { WorkerHub } from './workers'

/** Exponential backoff with jitter: half the step fixed, half random, so retries of a burst spread out. */
export function backoff(attempt: number, baseMs: number, maxMs: number, rand = Math.random()): number {
  const step = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1))
  return Math.round(step / 2 + (rand * step) / 2)
}

export function toDelivery(r: DeliveryRow): Delivery {
  return {
    id: r.id,
    provider: r.channel,
    level: r.level,
    targets: fromJson<string[]>(r.targets, []),
    recipients: fromJson<string[]>(r.recipients, []),
    timestamp: new Date(Number(r.created_at)).toISOString(),
    title: r.title,
    body: r.body,
    raw: fromJson<Record<string, unknown>>(r.raw, {}),
  }
}

/**
 * Moves deliveries from the durable queue to providers. Claims are per channel and never exceed
 * the free sends of that channel (local pool plus capable remote workers), so concurrency per
 * provider stays bounded and unclaimed work stays in the store for other instances.
 */
export function dispatcher(opts: {
  store: QueueStore
  channels: ChannelManager
  config: NotifyConfig
  hub?: WorkerHub
  log: Logger
  metrics: Metrics
  instanceId: string
}) {
  const { store, channels, config, hub, log } = opts
  const inflight = new Map<string, number>()
  /** Channels that may have due work; cleared when a claim comes back short. */
  const maybe = new Set<string>()
  const timers = new Set<Timer>()
  let pumping = false
  let again = false
  let scheduled = false
  let stopped = false
  const running = new Set<Promise<void>>()
  /** The deliveries this process is sending now: only their claims are renewed. */
  const held = new Set<string>()

  const sent = opts.metrics.counter(
    'svc_notify_deliveries_total',
    'Delivery attempts by channel and outcome',
    ['channel', 'outcome'],
  )
  const sendTime = opts.metrics.histogram(
    'svc_notify_send_duration_seconds',
    'Provider send duration',
    ['channel'],
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30],
  )

  const localFree = (ch: string) =>
    config.workers.local ? config.workers.concurrency - (inflight.get(ch) ?? 0) : 0
  const free = (slot: Slot) => Math.max(0, localFree(slot.name)) + (hub?.free(slot.type) ?? 0)

  function schedule() {
    if (scheduled || stopped) return
    scheduled = true
    setImmediate(() => {
      scheduled = false
      void pump()
    })
  }

  async function pump() {
    if (stopped) return
    if (pumping) {
      again = true
      return
    }
    pumping = true
    try {
      do {
        again = false
        for (const ch of [...maybe]) {
          const slot = channels.slots.get(ch)
          if (!slot || !slot.enabled) {
            maybe.delete(ch)
            continue
          }
          const room = Math.min(free(slot), config.queue.batch)
          if (room <= 0) continue
          if (stopped) break
          const rows = await store.claim(ch, room, config.queue.lease_ms)
          // Claimed while stopping: left claimed; this instance releases them at its next start (or the lease runs out).
          if (stopped) break
          if (rows.length < room) maybe.delete(ch)
          for (const row of rows) track(run(row, slot))
        }
      } while (again && !stopped)
    } catch (e) {
      log.error('claiming deliveries failed', { error: (e as Error).message })
    } finally {
      pumping = false
    }
  }

  function track(p: Promise<void>) {
    running.add(p)
    void p.finally(() => running.delete(p))
  }

  async function execute(row: DeliveryRow, slot: Slot): Promise<{ worker: string; result: SendResult }> {
    const delivery = toDelivery(row)
    const viaLocal = localFree(slot.name) > 0
    // Remote workers take what the local pool cannot (or everything, with workers.local off).
    const remote =
      !viaLocal && hub
        ? hub.dispatch(delivery, {
            name: slot.name,
            type: slot.type,
            config: slot.effective,
            trusted: slot.source === 'yaml',
          })
        : undefined
    if (remote) return { worker: remote.worker, result: await remote.result }
    inflight.set(slot.name, (inflight.get(slot.name) ?? 0) + 1)
    try {
      const provider = slot.provider
      if (!provider)
        return {
          worker: opts.instanceId,
          result: { ok: false, retryable: true, error: `provider unavailable: ${slot.status}` },
        }
      try {
        return { worker: opts.instanceId, result: await provider.send(delivery) }
      } catch (e) {
        // A provider must return failures, not throw them; a throw is still a failure worth retrying.
        return {
          worker: opts.instanceId,
          result: { ok: false, retryable: true, error: (e as Error).message || String(e) },
        }
      }
    } finally {
      inflight.set(slot.name, (inflight.get(slot.name) ?? 1) - 1)
    }
  }

  async function run(row: DeliveryRow, slot: Slot) {
    held.add(row.id)
    const attempt = Number(row.attempts)
    const startedAt = Date.now()
    const t0 = performance.now()
    const base = { id: row.id, attempt, startedAt, createdAt: Number(row.created_at) }
    try {
      if (attempt > config.retry.max_attempts) {
        // Claimed again after crashes mid-send: the bound on attempts holds anyway.
        await store.finish({
          ...base,
          kind: 'failed',
          worker: opts.instanceId,
          durationMs: 0,
          error: 'attempts exhausted',
          retryable: false,
        })
        return
      }
      const { worker, result } = await execute(row, slot)
      const durationMs = performance.now() - t0
      sendTime.observe({ channel: slot.name }, durationMs / 1000)
      if (result.ok) {
        sent.inc({ channel: slot.name, outcome: 'success' })
        await store.finish({ ...base, kind: 'success', worker, durationMs })
      } else if (result.retryable && attempt < config.retry.max_attempts) {
        sent.inc({ channel: slot.name, outcome: 'retry' })
        const delay = backoff(attempt, config.retry.base_ms, config.retry.max_ms)
        await store.finish({
          ...base,
          kind: 'retry',
          worker,
          durationMs,
          error: result.error,
          retryable: true,
          nextAt: Date.now() + delay,
        })
        const timer = setTimeout(() => {
          timers.delete(timer)
          hint(slot.name)
        }, delay + 5)
        timers.add(timer)
      } else {
        sent.inc({ channel: slot.name, outcome: 'failed' })
        await store.finish({
          ...base,
          kind: 'failed',
          worker,
          durationMs,
          error: result.error,
          retryable: result.retryable,
        })
      }
    } catch (e) {
      // The result could not be stored: the lease expires and the delivery is sent again (at least once).
      log.error('recording a delivery result failed', { id: row.id, error: (e as Error).message })
    } finally {
      held.delete(row.id)
      schedule()
    }
  }

  function hint(channel: string) {
    maybe.add(channel)
    schedule()
  }

  let poller: Timer | undefined
  let renewer: Timer | undefined
  return {
    hint,
    /** Something freed capacity (a remote worker said hello or answered). */
    wake: schedule,
    async start() {
      await store.release()
      const poll = async () => {
        try {
          for (const ch of await store.dueChannels()) maybe.add(ch)
          schedule()
        } catch (e) {
          log.error('polling the queue failed', { error: (e as Error).message })
        }
      }
      await poll()
      poller = setInterval(poll, config.queue.poll_ms)
      // Short leases, renewed while this instance sends: a dead instance's claims come back
      // within one lease, a live one's slow sends are never claimed twice, and a claim whose
      // result could not be recorded comes back too. When every claim of a live instance was
      // renewed, in no order, the renewal deadlocked with batches of results on PostgreSQL under a
      // large backlog; the results lost were renewed forever and never sent (session 19).
      renewer = setInterval(
        () =>
          void store
            .renew(config.queue.lease_ms, [...held])
            .catch((e) => log.error('renewing delivery claims failed', { error: (e as Error).message })),
        Math.max(100, Math.floor(config.queue.lease_ms / 3)),
      )
    },
    /** Stops claiming and waits (bounded) for sends in flight to record their results. */
    async stop(graceMs = 5000) {
      stopped = true
      if (poller) clearInterval(poller)
      if (renewer) clearInterval(renewer)
      for (const t of timers) clearTimeout(t)
      // Sends in flight record their results; a claim still in flight is not waited for (see pump).
      // The grace timer is cleared once the sends are done: a pending one kept a finished
      // process (seed, a test run) alive for the whole grace period.
      let grace: ReturnType<typeof setTimeout> | undefined
      await Promise.race([
        Promise.all([...running]),
        new Promise<void>((r) => {
          grace = setTimeout(r, graceMs)
        }),
      ])
      clearTimeout(grace)
    },
    inflight: () => [...inflight.values()].reduce((a, b) => a + b, 0),
  }
}
export type Dispatcher = ReturnType<typeof dispatcher>

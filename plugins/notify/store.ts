import type { Db } from '../../core/db'
import { insertMany } from '../../core/db/bulk'
import { GroupCommit } from '../../core/db/group-commit'

/** A delivery as written at acceptance and read back by a claim. */
export interface DeliveryRow {
  id: string
  notification_id: string
  channel: string
  provider_type: string
  type: string
  level: string
  targets: string
  recipients: string
  title: string
  body: string
  raw: string
  attempts: number
  created_at: number
}

export interface NotificationRow {
  id: string
  type: string
  level: string
  title: string
  template: string | null
  idempotency_key: string | null
  channels: string
  created_at: number
}

export type Outcome =
  | {
      id: string
      kind: 'success'
      attempt: number
      worker: string
      startedAt: number
      durationMs: number
      createdAt: number
    }
  | {
      id: string
      kind: 'retry' | 'failed'
      attempt: number
      worker: string
      startedAt: number
      durationMs: number
      createdAt: number
      error: string
      retryable: boolean
      nextAt?: number
    }

const NOTIF_COLS = [
  'id',
  'type',
  'level',
  'title',
  'template',
  'idempotency_key',
  'channels',
  'created_at',
] as const
const DELIV_COLS = [
  'id',
  'notification_id',
  'channel',
  'provider_type',
  'type',
  'level',
  'status',
  'targets',
  'recipients',
  'title',
  'body',
  'raw',
  'attempts',
  'next_at',
  'created_at',
] as const
const ATTEMPT_COLS = [
  'id',
  'delivery_id',
  'attempt',
  'worker',
  'started_at',
  'duration_ms',
  'ok',
  'retryable',
  'error',
] as const

export const CLAIM_COLS =
  'id, notification_id, channel, provider_type, type, level, targets, recipients, title, body, raw, attempts, created_at'

/** What `accept` stores: a notification with its deliveries, and the answer its idempotency key recalls. */
interface Acceptance {
  notification?: NotificationRow
  deliveries: DeliveryRow[]
  idempotency?: { key: string; result: string }
  /** Set when another request (on any instance) recorded the key first: nothing of this one was stored. */
  lost?: boolean
}

export function queueStore(db: Db, instanceId: string, opts: { idempotencyEntries?: number } = {}) {
  // SQLite has one writer, so parallel batches would only queue behind each other; on PostgreSQL two
  // in flight hide the commit round trip (measured: 4 made batches smaller and cost CPU on 2 cores).
  const parallel = db.dialect === 'postgres' ? 2 : 1
  const keep = opts.idempotencyEntries ?? 1000
  let recorded = 0
  // Strictly increasing in this process, so first in first out holds for keys of the same millisecond.
  let lastAt = 0
  const accept = new GroupCommit<Acceptance>(
    async (items) => {
      const now = Date.now()
      await db.tx(async (tx) => {
        // The key is claimed and its answer stored in the transaction of the deliveries: a key is
        // recorded with everything it answers for, or not at all. A concurrent twin on another
        // instance waits on the key's row lock (PostgreSQL) or the writer (SQLite), finds it taken,
        // and stores nothing.
        // In key order: two instances' batches never wait on each other's keys crosswise (deadlock).
        const keyed = items
          .filter((i) => i.idempotency)
          .sort((x, y) => (x.idempotency!.key < y.idempotency!.key ? -1 : 1))
        if (keyed.length) {
          const won = new Set(
            (
              await insertMany(
                tx,
                'notify_idempotency',
                ['key', 'result', 'created_at'],
                keyed.flatMap((i) => {
                  lastAt = Math.max(now, lastAt + 1)
                  return [i.idempotency!.key, i.idempotency!.result, lastAt]
                }),
                { tail: 'ON CONFLICT (key) DO NOTHING RETURNING key' },
              )
            ).map((r) => r.key as string),
          )
          for (const i of keyed) i.lost = !won.delete(i.idempotency!.key)
          recorded += keyed.length
          if (recorded >= Math.max(1, keep / 10)) {
            recorded = 0
            await tx.run(
              'DELETE FROM notify_idempotency WHERE created_at < (SELECT created_at FROM notify_idempotency ORDER BY created_at DESC LIMIT 1 OFFSET ?)',
              [keep - 1],
            )
          }
        }
        const kept = items.filter((i) => !i.lost)
        await insertMany(
          tx,
          'notify_notifications',
          NOTIF_COLS,
          kept.flatMap(({ notification: n }) => (n ? NOTIF_COLS.map((c) => n[c]) : [])),
        )
        const rows = kept.flatMap((i) => i.deliveries)
        await insertMany(
          tx,
          'notify_deliveries',
          DELIV_COLS,
          rows.flatMap((d) =>
            DELIV_COLS.map((c) =>
              c === 'status' ? 'pending' : c === 'next_at' ? now : c === 'attempts' ? 0 : d[c],
            ),
          ),
        )
      })
    },
    { parallel },
  )

  const finish = new GroupCommit<Outcome>(
    async (items) => {
      const now = Date.now()
      // In id order: concurrent results and the renewal of leases lock rows in one order.
      items.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      await db.tx(async (tx) => {
        const jobs = items.map((o) => {
          if (o.kind === 'success')
            return tx.run(
              `UPDATE notify_deliveries SET status = 'success', finished_at = ?, latency_ms = ?, last_error = NULL, claimed_by = NULL, lease_until = NULL
             WHERE id = ? AND claimed_by = ? AND status = 'pending'`,
              [now, now - o.createdAt, o.id, instanceId],
            )
          if (o.kind === 'retry')
            return tx.run(
              "UPDATE notify_deliveries SET next_at = ?, last_error = ?, claimed_by = NULL, lease_until = NULL WHERE id = ? AND claimed_by = ? AND status = 'pending'",
              [o.nextAt ?? now, o.error, o.id, instanceId],
            )
          return tx.run(
            `UPDATE notify_deliveries SET status = 'failed', finished_at = ?, latency_ms = ?, last_error = ?, claimed_by = NULL, lease_until = NULL
           WHERE id = ? AND claimed_by = ? AND status = 'pending'`,
            [now, now - o.createdAt, o.error, o.id, instanceId],
          )
        })
        jobs.push(
          insertMany(
            tx,
            'notify_attempts',
            ATTEMPT_COLS,
            items.flatMap((o) => [
              Bun.randomUUIDv7(),
              o.id,
              o.attempt,
              o.worker,
              o.startedAt,
              Math.round(o.durationMs),
              o.kind === 'success' ? 1 : 0,
              o.kind !== 'success' && o.retryable ? 1 : 0,
              o.kind === 'success' ? null : o.error,
            ]),
          ).then((r) => r.length),
        )
        await Promise.all(jobs)
      })
    },
    { parallel },
  )

  return {
    /**
     * Stores a notification and its deliveries (none for a held one), with the answer its
     * idempotency key recalls. False when the key was recorded first by another request (on any
     * instance): then nothing was stored and `recall` answers the first request's result.
     */
    async accept(
      notification: NotificationRow | undefined,
      deliveries: DeliveryRow[],
      idempotency?: { key: string; result: string },
    ): Promise<boolean> {
      const item: Acceptance = { notification, deliveries, idempotency }
      await accept.add(item)
      return !item.lost
    },
    /** The recorded answer of an idempotency key, from any instance and across restarts. */
    async recall(key: string): Promise<string | undefined> {
      const row = await db.get<{ result: string }>('SELECT result FROM notify_idempotency WHERE key = ?', [
        key,
      ])
      return row?.result
    },
    finish: (o: Outcome) => finish.add(o),

    /**
     * Claims due deliveries of one channel for this instance. On PostgreSQL and MySQL `FOR UPDATE SKIP
     * LOCKED` lets instances sharing the database claim disjoint rows without waiting on each
     * other; on SQLite the single serialized writer makes the statement atomic already.
     */
    async claim(channel: string, limit: number, leaseMs: number): Promise<DeliveryRow[]> {
      const now = Date.now()
      const lock = db.dialect === 'sqlite' ? '' : ' FOR UPDATE SKIP LOCKED'
      return db.all<DeliveryRow>(
        `UPDATE notify_deliveries SET claimed_by = ?, lease_until = ?, attempts = attempts + 1
         WHERE id IN (SELECT id FROM notify_deliveries WHERE status = 'pending' AND channel = ? AND next_at <= ?
           AND (lease_until IS NULL OR lease_until < ?) ORDER BY next_at LIMIT ?${lock})
         RETURNING ${CLAIM_COLS}`,
        [instanceId, now + leaseMs, channel, now, now, limit],
      )
    },

    /**
     * Extends the claims of the sends this instance has in flight (`ids`): it is alive and still
     * working on them. A claim it lost track of (its result could not be recorded) is not renewed:
     * its lease runs out and the delivery is sent again. Rows are locked in id order, as `finish`
     * takes them, so the two never deadlock.
     */
    async renew(leaseMs: number, ids: string[]): Promise<number> {
      const sorted = [...ids].sort()
      const until = Date.now() + leaseMs
      let renewed = 0
      // Slices of up to 512, each padded to a power of two with its last id: few statement texts.
      for (let at = 0; at < sorted.length; at += 512) {
        const part = sorted.slice(at, at + 512)
        const size = 2 ** Math.ceil(Math.log2(part.length))
        while (part.length < size) part.push(part[part.length - 1])
        renewed += await db.run(
          `UPDATE notify_deliveries SET lease_until = ? WHERE claimed_by = ? AND status = 'pending' AND lease_until IS NOT NULL
           AND id IN (${part.map(() => '?').join(', ')})`,
          [until, instanceId, ...part],
        )
      }
      return renewed
    },

    /** Gives back claims (a remote worker went away; this instance restarted) for immediate re-delivery. */
    async release(ids?: string[]): Promise<void> {
      if (ids && !ids.length) return
      if (!ids) {
        await db.run(
          "UPDATE notify_deliveries SET claimed_by = NULL, lease_until = NULL WHERE claimed_by = ? AND status = 'pending'",
          [instanceId],
        )
        return
      }
      await db.run(
        `UPDATE notify_deliveries SET claimed_by = NULL, lease_until = NULL, attempts = attempts - 1
         WHERE claimed_by = ? AND status = 'pending' AND id IN (${ids.map(() => '?').join(', ')})`,
        [instanceId, ...ids],
      )
    },

    /**
     * Channels that have due work, so the dispatcher only claims where something waits. Every
     * instance asks twice a second, so the cost must not grow with the backlog: the channels
     * with pending rows are found by skipping through the queue index one channel at a time,
     * and each is asked for one due, unleased row. (`SELECT DISTINCT channel ... WHERE due`
     * read every pending row: with 300,000 waiting behind a channel that was down, 129 ms a poll
     * on PostgreSQL and 94 ms on SQLite without statistics, against 1.8 and 0.05 ms.)
     */
    async dueChannels(): Promise<string[]> {
      const now = Date.now()
      const rows = await db.all<{ channel: string }>(
        `WITH RECURSIVE ch (c) AS (
           SELECT min(channel) FROM notify_deliveries WHERE status = 'pending'
           UNION ALL
           SELECT (SELECT min(channel) FROM notify_deliveries WHERE status = 'pending' AND channel > ch.c)
           FROM ch WHERE ch.c IS NOT NULL)
         SELECT c AS channel FROM ch WHERE c IS NOT NULL AND EXISTS (
           SELECT 1 FROM notify_deliveries d WHERE d.status = 'pending' AND d.channel = ch.c AND d.next_at <= ?
             AND (d.lease_until IS NULL OR d.lease_until < ?))`,
        [now, now],
      )
      return rows.map((r) => r.channel)
    },

    async size(): Promise<number> {
      const r = await db.get<{ n: number }>(
        "SELECT COUNT(*) AS n FROM notify_deliveries WHERE status = 'pending'",
      )
      return Number(r?.n ?? 0)
    },
  }
}
export type QueueStore = ReturnType<typeof queueStore>

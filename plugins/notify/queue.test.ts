import { afterAll, beforeAll, expect, test } from 'bun:test'
import { forEachEngine, until } from '../../test/helpers'
import { queueStore } from './store'
import { appOn, httpSink, ownStore } from './testing'

forEachEngine((engine) => {
  let store: Awaited<ReturnType<typeof ownStore>>
  const sink = httpSink()
  const channels = { hook: { type: 'webhook', url: sink.url } }
  const notify = (workers: Record<string, unknown>, queue: Record<string, unknown> = {}) => ({
    'webhook-provider': {},
    notify: { channels, workers, queue: { poll_ms: 20, ...queue }, idempotency_entries: 2 },
  })
  /** One notification to the hook channel; its delivery's id. */
  const enqueue = async (app: Awaited<ReturnType<typeof appOn>>, title: string) =>
    (
      (await app.req('POST', '/api/v1/notify', { type: 'x', channel: 'hook', title })).body.data
        .task_ids as string[]
    )[0]
  beforeAll(async () => {
    store = await ownStore(engine)
  })
  afterAll(async () => {
    await store.drop()
    sink.stop()
  })

  test('accepted deliveries are in the store before the answer and survive a restart', async () => {
    // No local pool and no remote worker: nothing can deliver, the queue holds everything.
    const a = await appOn(store, notify({ local: false }))
    const ids: string[] = []
    for (let i = 0; i < 5; i++)
      ids.push(
        ...((await a.req('POST', '/api/v1/notify', { type: 'x', channel: 'hook', title: `d${i}` })).body.data
          .task_ids as string[]),
      )
    expect((await a.req('GET', '/api/v1/queue')).body.data.size).toBe(5)
    await a.stop()

    const b = await appOn(store, notify({ local: true }))
    await until(() => ids.every((id) => sink.hits.some((h) => h.body.id === id)))
    expect(ids.every((id) => sink.hits.some((h) => h.body.id === id))).toBe(true)
    expect(await until(async () => (await b.req('GET', '/api/v1/queue')).body.data.size === 0)).toBe(true)
    await b.stop()
  }, 30_000)

  test('a claim a live instance is not sending (its result was not recorded) is not renewed: it is delivered once its lease runs out', async () => {
    const a = await appOn(store, notify({ local: false }))
    const id = await enqueue(a, 'lost track')
    // Not due until the live instance has started (its start gives back its old claims).
    await a.db.run('UPDATE notify_deliveries SET next_at = ? WHERE id = ?', [Date.now() + 3_600_000, id])
    await a.stop()
    const b = await appOn(store, notify({ local: true }, { instance_id: 'live-one', lease_ms: 1000 }))
    // Claimed by this live instance, as if a send's result had failed to be recorded.
    await b.db.run(
      "UPDATE notify_deliveries SET claimed_by = 'live-one', lease_until = ?, attempts = 1, next_at = ? WHERE id = ?",
      [Date.now() + 1000, Date.now(), id],
    )
    // Renewing every claim of a live instance kept it pending forever.
    expect(await until(() => sink.hits.some((h) => h.body.id === id), 10_000)).toBe(true)
    await b.stop()
  }, 30_000)

  test("an abandoned claim (a crashed instance's lease ran out) is delivered again, with the same id", async () => {
    const a = await appOn(store, notify({ local: false }))
    const id = await enqueue(a, 'orphan')
    await a.db.run(
      "UPDATE notify_deliveries SET claimed_by = 'crashed-instance', lease_until = ?, attempts = 1 WHERE id = ?",
      [Date.now() - 1, id],
    )
    await a.stop()
    const b = await appOn(store, notify({ local: true }))
    expect(await until(() => sink.hits.some((h) => h.body.id === id))).toBe(true)
    const log = await until(async () => {
      const r = await b.req('GET', `/api/v1/logs/${id}`)
      return r.body.data.status === 'success' ? r.body.data : undefined
    })
    expect(log?.attempt_count).toBe(2)
    await b.stop()
  }, 30_000)

  test('two instances sharing one store claim disjoint deliveries: each delivered exactly once', async () => {
    const a = await appOn(store, notify({ local: true, concurrency: 4 }, { instance_id: 'A', batch: 5 }))
    const b = await appOn(store, notify({ local: true, concurrency: 4 }, { instance_id: 'B', batch: 5 }))
    const before = sink.hits.length
    const ids: string[] = []
    await Promise.all(
      Array.from({ length: 60 }, async (_, i) => {
        const via = i % 2 ? a : b
        ids.push(
          ...((await via.req('POST', '/api/v1/notify', { type: 'x', channel: 'hook', title: `m${i}` })).body
            .data.task_ids as string[]),
        )
      }),
    )
    // Every delivery finished (none pending or claimed) on both instances: a duplicate would have been sent by now.
    await until(async () => {
      const open = await a.db.get<{ n: number | string }>(
        `SELECT COUNT(*) AS n FROM notify_deliveries WHERE status = 'pending' AND id IN (${ids.map(() => '?').join(',')})`,
        ids,
      )
      return ids.length === 60 && Number(open?.n) === 0
    }, 10_000)
    const got = sink.hits.slice(before).map((h) => String(h.body.id))
    expect(got.length).toBe(60)
    expect(new Set(got).size).toBe(60)
    expect(new Set(got)).toEqual(new Set(ids))
    const workers = await a.db.all<{ worker: string }>(
      `SELECT DISTINCT worker FROM notify_attempts WHERE delivery_id IN (${ids.map(() => '?').join(',')})`,
      ids,
    )
    expect(workers.length).toBeGreaterThanOrEqual(1)
    await a.stop()
    await b.stop()
  }, 30_000)

  test('a live instance renews its claims: a send slower than the lease is not taken by another instance; the receiver sees the delivery id header', async () => {
    let release!: () => void
    const gate = new Promise<void>((r) => {
      release = r
    })
    const slow = httpSink(async () => {
      await gate
      return new Response('ok')
    })
    const settings = (id: string) => {
      const s = notify({ local: true, concurrency: 4 }, { instance_id: id, lease_ms: 1000 })
      return {
        ...s,
        notify: { ...s.notify, channels: { ...channels, slow: { type: 'webhook', url: slow.url } } },
      }
    }
    const a = await appOn(store, settings('A'))
    const b = await appOn(store, settings('B'))
    try {
      const sent = await a.req('POST', '/api/v1/notify', { type: 'x', channel: 'slow', title: 'slow one' })
      const id = (sent.body.data.task_ids as string[])[0]
      await until(() => slow.hits.length === 1)
      // Three leases long: without renewal the other instance (or this one) would claim it again.
      const claimedBy = async () =>
        (await a.db.get<{ claimed_by: string; lease_until: number }>(
          'SELECT claimed_by, lease_until FROM notify_deliveries WHERE id = ?',
          [id],
        ))!
      const first = await claimedBy()
      await until(
        async () => Number((await claimedBy()).lease_until) > Number(first.lease_until) + 1500,
        5000,
      )
      const later = await claimedBy()
      expect(later.claimed_by).toBe(first.claimed_by)
      expect(slow.hits).toHaveLength(1)
      expect(slow.hits[0].headers['x-liveops-delivery']).toBe(id)
      release()
      await until(async () => (await a.req('GET', `/api/v1/logs/${id}`)).body.data.status === 'success')
      expect(slow.hits).toHaveLength(1)
    } finally {
      release()
      await a.stop()
      await b.stop()
      slow.stop()
    }
  }, 30_000)

  test('idempotency records are evicted first in first out (idempotency_entries: 2)', async () => {
    const a = await appOn(store, notify({ local: false }))
    const send = async (key: string) =>
      (
        await a.req('POST', '/api/v1/notify', {
          type: 'x',
          channel: 'hook',
          title: 't',
          idempotency_key: key,
        })
      ).body.data.notification_id
    const k1 = await send('k1')
    await send('k2')
    const k3 = await send('k3')
    expect(await send('k3')).toBe(k3)
    expect(await send('k1')).not.toBe(k1)
    await a.stop()
  }, 30_000)

  test('the poll names each channel with a due, unclaimed delivery, and only those, however long the queue', async () => {
    const three = {
      'webhook-provider': {},
      notify: {
        channels: {
          ...channels,
          later: { type: 'webhook', url: sink.url },
          busy: { type: 'webhook', url: sink.url },
        },
        workers: { local: false },
      },
    }
    const a = await appOn(store, three)
    await a.db.run('DELETE FROM notify_deliveries')
    const q = queueStore(a.db, 'poll-test')
    expect(await q.dueChannels()).toEqual([])
    for (const channel of ['hook', 'later', 'busy'])
      for (let i = 0; i < 40; i++)
        await a.req('POST', '/api/v1/notify', { type: 'x', channel, title: `${channel}${i}` })
    const soon = Date.now() + 60_000
    // Retries not yet due, and deliveries every one of which a live instance holds.
    await a.db.run("UPDATE notify_deliveries SET next_at = ? WHERE channel = 'later'", [soon])
    await a.db.run(
      "UPDATE notify_deliveries SET claimed_by = 'other', lease_until = ? WHERE channel = 'busy'",
      [soon],
    )
    // A final outcome is not waiting either.
    await a.db.run(
      "UPDATE notify_deliveries SET status = 'failed' WHERE channel = 'hook' AND title <> 'hook39'",
    )
    expect(await q.dueChannels()).toEqual(['hook'])
    await a.db.run(
      "UPDATE notify_deliveries SET lease_until = ? WHERE channel = 'busy' AND title = 'busy7'",
      [Date.now() - 1],
    )
    await a.db.run("UPDATE notify_deliveries SET status = 'success' WHERE channel = 'hook'")
    expect(await q.dueChannels()).toEqual(['busy'])
    await a.stop()
  }, 30_000)

  test('a runtime change on one instance reaches the others sharing the store', async () => {
    const a = await appOn(store, notify({ local: false }, { instance_id: 'A', sync_ms: 100 }))
    const b = await appOn(store, notify({ local: false }, { instance_id: 'B', sync_ms: 100 }))
    const view = async () =>
      (await b.req('GET', '/api/v1/config/hook')).body.data as { enabled: boolean; config: { url: string } }
    await a.req('POST', '/api/v1/providers/hook/disable')
    expect(await until(async () => (await view()).enabled === false)).toBe(true)
    const url = `${sink.url}?v=2`
    expect((await a.req('PUT', '/api/v1/config/hook', { config: { url }, enabled: true })).status).toBe(200)
    // The path and query values are secret: the read shows the URL with them masked.
    const masked = `${new URL(sink.url).origin}/set?v=set`
    expect(await until(async () => (await view()).config.url === masked)).toBe(true)
    expect((await view()).enabled).toBe(true)
    await a.stop()
    await b.stop()
  }, 30_000)
})

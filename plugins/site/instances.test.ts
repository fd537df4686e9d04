import { expect, test } from 'bun:test'
import { listen } from '../../core/listen'
import { engines, until } from '../../test/helpers'
import { appOn, ownStore } from '../notify/testing'
import { alert, sink } from './testing'

/** Two instances on one PostgreSQL schema (or MySQL database): what one stores, the other's browsers see. */
for (const engine of (['postgres', 'mysql'] as const).filter((e) => engines.includes(e)))
  test(`[${engine}] a message stored by one instance is pushed to browsers following another; an override on one applies on the other at once`, async () => {
    const store = await ownStore(engine)
    const a = await appOn(store, { notify: {}, site: {} })
    const b = await appOn(store, { notify: {}, site: {} })
    const server = listen(b, { port: 0, hostname: '127.0.0.1' })
    try {
      const res = await fetch(`http://127.0.0.1:${server.port}/api/v1/site/messages/stream`, {
        headers: { 'x-admin-token': 'test-admin-token' },
      })
      expect(res.status).toBe(200)
      const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader()
      expect((await reader.read()).value).toContain(': connected')
      await a.bus.emit('alert.fired', {
        alert_id: 'x-1',
        source: 'ops-alerts',
        level: 'error',
        title: 'Stored on A',
        body: 'seen on B',
        params: {},
        at: new Date().toISOString(),
      })
      let text = ''
      const deadline = Date.now() + 5000
      while (!text.includes('event: message') && Date.now() < deadline) text += (await reader.read()).value
      expect(JSON.parse(/data: (.*)\n/.exec(text)![1])).toMatchObject({ title: 'Stored on A' })
      await reader.cancel()

      const admin = { 'x-admin-token': 'test-admin-token', 'content-type': 'application/json' }
      const put = await a.app.handle(
        new Request('http://localhost/api/v1/site/notification.smtpHost', {
          method: 'PUT',
          headers: admin,
          body: JSON.stringify({ value: 'relay.b.test' }),
        }),
      )
      expect(put.status).toBe(200)
      const read = await b.app.handle(
        new Request('http://localhost/api/v1/site/notification.smtpHost', { headers: admin }),
      )
      expect((await read.json()).data).toMatchObject({ value: 'relay.b.test', origin: 'override' })
    } finally {
      server.stop(true)
      await a.stop()
      await b.stop()
      await store.drop()
    }
  })

/**
 * Audit 19 F4: each instance routes notifications from a copy of the settings taken once per
 * revision; another instance's write drops it at its notice (the revision check is set to an hour
 * here, so only the notice can).
 */
for (const engine of (['postgres', 'mysql'] as const).filter((e) => engines.includes(e)))
  test(`[${engine}] a setting changed on one instance drops the other's copy at its notice: its next notification follows it`, async () => {
    const store = await ownStore(engine)
    const hook = sink()
    const site = { notification: { inAppEnabled: false, webhookUrl: hook.url }, sync_ms: 3_600_000 }
    const a = await appOn(store, { notify: {}, site })
    const b = await appOn(store, { notify: {}, site })
    const admin = { 'x-admin-token': 'test-admin-token', 'content-type': 'application/json' }
    try {
      // B routes one: its copy now holds in-app off.
      await b.bus.emit('alert.fired', alert('before'))
      await until(() => hook.hits.length >= 1, { what: 'the first webhook delivery' })
      const put = await a.app.handle(
        new Request('http://localhost/api/v1/site/notification.inAppEnabled', {
          method: 'PUT',
          headers: admin,
          body: JSON.stringify({ value: true }),
        }),
      )
      expect(put.status).toBe(200)
      const messages = async () =>
        (
          await (
            await b.app.handle(new Request('http://localhost/api/v1/site/messages', { headers: admin }))
          ).json()
        ).data.total
      await until(
        async () => {
          await b.bus.emit('alert.fired', alert('after'))
          return (await messages()) > 0
        },
        { what: "B routing to in-app after A's change" },
      )
    } finally {
      await a.stop()
      await b.stop()
      hook.stop()
      await store.drop()
    }
  })

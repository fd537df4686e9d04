import { expect, test } from 'bun:test'
import { listen } from '../../core/listen'
import { engines } from '../../test/helpers'
import { appOn, ownStore } from '../notify/testing'

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

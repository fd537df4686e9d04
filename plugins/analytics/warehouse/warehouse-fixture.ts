import { beforeAll, expect } from 'bun:test'
import type { Engine } from '../../../test/helpers'
import { ingestSuite } from '../../ingest/signed/ingest-fixture'
import { signed } from '../../ingest/testing'

/**
 * The app of `engine` for the calling file's suite, as the ingestion tests have it (ingestSuite:
 * `fx.a`, `fx.admin`, `fx.gameId`, `fx.ev`), with what the warehouse reads ingested once it began.
 * Shared by warehouse-reads.test.ts and warehouse-config.test.ts.
 */
export function warehouseSuite(engine: Engine) {
  const fx = ingestSuite(engine)
  const { ev } = fx
  beforeAll(async () => {
    // A login in every environment, a payment and some plain events.
    const logins = ['dev', 'prod', 'staging'].map((env) => ev('login', { env, uid: `w-${env}` }))
    const taps = Array.from({ length: 10 }, (_, i) => ev('tap', { uid: `t${i}` }))
    expect((await signed(fx.a, '/api/ingest/events', [...logins, ...taps])).status).toBe(200)
    const pay = ev('payment', { order_id: 'w-1', status: 'success', amount_cents: 499, currency: 'USD' })
    expect((await signed(fx.a, '/api/ingest/payments', [pay])).status).toBe(200)
  })
  return fx
}

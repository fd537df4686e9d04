#!/usr/bin/env bun
/**
 * Where the event loop's time goes for one signed 100-event batch, stage by stage, without HTTP
 * or the store: digest and HMAC, JSON.parse, validation, the PII policy, and the writer's
 * per-commit preparation. Microseconds per event, medians of several rounds.
 *
 *   bun scripts/bench/ingest-stages.ts [--rounds=7] [--batches=2000]
 */
import { protect } from '../../plugins/ingest/privacy/privacy'
import { NonceCache, verifySignature } from '../../plugins/ingest/signed/signature'
import { validateEvents } from '../../plugins/ingest/signed/validate'
import { eventsBody, shapes } from './events'
import { arg, median } from './lib'

const rounds = Number(arg('rounds', '7'))
const batches = Number(arg('batches', '2000'))
const SECRET = 'stage-secret'
const gameId = '01a2075d-0306-7071-a8a6-1b019ae6abfd'
const pool = shapes(gameId)
const t0 = Date.now() - 86_400_000
const bodies = Array.from({ length: batches }, (_, i) =>
  new TextEncoder().encode(eventsBody(pool, 100, t0 + i)),
)
const sign = (body: Uint8Array, nonce: string) => {
  const ts = String(Math.floor(Date.now() / 1000))
  const digest = new Bun.CryptoHasher('sha256').update(body).digest('hex')
  const signature = new Bun.CryptoHasher('sha256', SECRET)
    .update(`${ts}\n${nonce}\n${digest}`)
    .digest('base64')
  return { timestamp: ts, nonce, signature }
}
// The default policy of a new environment: IPs masked, the rest allowed.
const env = {
  gameId,
  name: 'prod',
  settings: {
    samplingRate: 1,
    propertyAllowList: [],
    pii: { email: 'allow', phone: 'allow', ip: 'mask' },
    rateLimit: { requestsPerMinutePerIp: 0 },
  },
}
const envs = new Map([[`${gameId}\u0001prod`, env]]) as never

const stages: Record<string, number[]> = { verify: [], parse: [], validate: [], protect: [] }
let sink = 0
for (let r = 0; r < rounds; r++) {
  const headers = bodies.map((b, i) => sign(b, `n${r}-${i}`))
  const nonces = new NonceCache(900_000)
  let t = performance.now()
  for (let i = 0; i < batches; i++) verifySignature(headers[i], bodies[i], SECRET, nonces, 300)
  stages.verify.push(performance.now() - t)
  t = performance.now()
  const lists = bodies.map((b) => JSON.parse(new TextDecoder().decode(b)) as unknown[])
  stages.parse.push(performance.now() - t)
  t = performance.now()
  const valid = lists.map((l) => validateEvents(l, { payments: false }).events)
  stages.validate.push(performance.now() - t)
  t = performance.now()
  for (const v of valid) sink += protect(v, envs).kept.length
  stages.protect.push(performance.now() - t)
}
const perEvent = (ms: number) => Math.round(((ms * 1000) / (batches * 100)) * 100) / 100
console.log(
  JSON.stringify({
    batches,
    rounds,
    usPerEvent: Object.fromEntries(Object.entries(stages).map(([k, v]) => [k, perEvent(median(v))])),
    sink,
  }),
)

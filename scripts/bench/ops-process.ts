/** A real liveops server process for the operations benchmarks, and signed ingestion load against it. */
import { join } from 'node:path'
import { startServer } from '../../test/process'

export const ADMIN = 'bench-admin-token'
export const SECRET = 'bench-signing-secret'
export const admin = { 'x-admin-token': ADMIN, 'content-type': 'application/json' }

export async function server(dir: string, plugins: string) {
  const config = join(dir, 'bench.yaml')
  await Bun.write(
    config,
    [
      `data_dir: ${dir}`,
      'rate_limit: { requests_per_minute: 0, burst: 0 }',
      // The bench's TLS servers listen on loopback, which the outbound policy denies by default.
      'outbound: { allow: [127.0.0.0/8] }',
      'log: { level: info }',
      `plugins: ${plugins}`,
      '',
    ].join('\n'),
  )
  return startServer(
    [process.execPath, 'core/main.ts', '--config', config],
    { ADMIN_TOKEN: ADMIN, LOG_LEVEL: 'info' },
    {
      timeoutMs: 60_000,
    },
  )
}

export function sign(body: string): Record<string, string> {
  const ts = String(Math.floor(Date.now() / 1000))
  const nonce = crypto.randomUUID()
  const digest = new Bun.CryptoHasher('sha256').update(body).digest('hex')
  const sig = new Bun.CryptoHasher('sha256', SECRET).update(`${ts}\n${nonce}\n${digest}`).digest('base64')
  return { 'content-type': 'application/json', 'x-timestamp': ts, 'x-nonce': nonce, 'x-signature': sig }
}

/** Signed 10-event ingestion requests from `connections` loops until `stop()` holds; latencies in ms. */
export async function load(base: string, gameId: string, connections: number, stop: () => boolean) {
  const lat: number[] = []
  let failed = 0
  await Promise.all(
    Array.from({ length: connections }, async (_, c) => {
      while (!stop()) {
        const now = Date.now()
        const events = Array.from({ length: 10 }, (_, i) => ({
          event: 'heartbeat',
          ts: String(now + i),
          game_id: gameId,
          env: 'prod',
          uid: `u${c}-${i}`,
        }))
        const body = JSON.stringify(events)
        const t = performance.now()
        const r = await fetch(`${base}/api/ingest/events`, { method: 'POST', headers: sign(body), body })
        await r.arrayBuffer()
        lat.push(performance.now() - t)
        if (r.status !== 200) failed++
      }
    }),
  )
  lat.sort((a, b) => a - b)
  return {
    n: lat.length,
    failed,
    p50: lat[Math.floor(lat.length * 0.5)],
    p99: lat[Math.floor(lat.length * 0.99)],
  }
}

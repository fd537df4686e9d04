import { afterAll, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type Running, startServer } from './process'

/**
 * A stopping server ends its endless responses (server-sent event streams) itself: the
 * `server.draining` event. Without it, a dashboard left open held every shutdown for the whole
 * `shutdown_grace_s`; here the grace is far longer than the test may run, so the process can only
 * exit in time if the streams were ended.
 */
const root = join(import.meta.dir, '..')
const dir = mkdtempSync(join(tmpdir(), 'liveops-drain-'))
let s: Running | undefined
afterAll(() => {
  s?.proc.kill('SIGKILL')
  rmSync(dir, { recursive: true, force: true })
})

test('SIGTERM ends the realtime and in-app message streams and the process exits', async () => {
  const config = join(dir, 'liveops.yaml')
  await Bun.write(
    config,
    `data_dir: ${dir}
server: { shutdown_grace_s: 600 }
plugins: { games: {}, ingest: { signing_secret: drain-secret }, analytics: {}, notify: {}, site: {} }
`,
  )
  s = await startServer(
    [process.execPath, 'core/main.ts', '--config', config],
    { ADMIN_PASSWORD: 'drain-admin-pw' },
    { cwd: root },
  )
  const post = (path: string, body: unknown, token?: string) =>
    fetch(`${s?.base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(body),
    })
  const { token } = await (
    await post('/api/auth/login', { email: 'admin@localhost', password: 'drain-admin-pw' })
  ).json()
  const game = await (
    await post(
      '/api/games',
      { name: 'Drain Quest', genre: 'PUZZLE', platforms: ['WEB'], timezone: 'UTC', defaultCurrency: 'EUR' },
      token,
    )
  ).json()
  const open = async (path: string) => {
    const r = await fetch(`${s?.base}${path}`, { headers: { authorization: `Bearer ${token}` } })
    expect(r.status).toBe(200)
    const reader = (r.body as ReadableStream<Uint8Array>).getReader()
    await reader.read() // the stream is live
    return reader
  }
  const streams = [
    await open(`/api/v1/analytics/realtime?gameId=${game.id}&env=prod`),
    await open('/api/v1/site/messages/stream'),
  ]
  s.proc.kill('SIGTERM')
  // Each stream ends (done), rather than hanging until the grace runs out.
  for (const reader of streams) for (;;) if ((await reader.read()).done) break
  expect(await s.proc.exited).toBe(0)
  expect(s.output()).toContain('SIGTERM: draining')
}, 60_000)

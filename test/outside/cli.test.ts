import { afterAll, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort } from '../own-postgres'

/* Issue 15 point 9, the command line: problems are said plainly with exit status 2, never a stack trace. */
const dir = mkdtempSync(join(tmpdir(), 'liveops-cli-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const main = join(import.meta.dir, '../../core/main.ts')

async function run(...args: string[]) {
  const p = Bun.spawn([process.execPath, main, ...args], { stdout: 'pipe', stderr: 'pipe' })
  const [out, err, code] = await Promise.all([
    new Response(p.stdout).text(),
    new Response(p.stderr).text(),
    p.exited,
  ])
  return { out, err, code }
}

test('check-config on a missing file says so and exits 2, like serve', async () => {
  const missing = join(dir, 'nope.yaml')
  for (const args of [
    ['check-config', missing],
    ['serve', '--config', missing],
  ]) {
    const r = await run(...args)
    expect(r.code).toBe(2)
    expect(r.err.trim()).toBe(`config file not found: ${missing}`)
  }
})

test('a YAML syntax error keeps its line, column and the offending line', async () => {
  const file = join(dir, 'bad.yaml')
  writeFileSync(file, 'server:\n  port: 8080\n  host: [oops\nplugins: {}\n')
  const r = await run('check-config', file)
  expect(r.code).toBe(2)
  expect(r.err).toMatch(/at line \d+, column \d+:\n\n/)
  expect(r.err).toContain('host: [oops')
  expect(r.err).not.toContain('    at ')
})

test('help lists every command, worker included', async () => {
  const r = await run('help')
  expect(r.code).toBe(0)
  for (const cmd of ['[serve]', 'check-config', 'worker', 'help']) expect(r.out).toContain(`liveops ${cmd}`)
})

test('rebuild: beside a running server the holder of the lease does it; a bad name or date exits 2', async () => {
  const { startServer } = await import('../process')
  const { signRequest } = await import('../../sdk/sign')
  const data = mkdtempSync(join(dir, 'rebuild-'))
  const file = join(data, 'liveops.yaml')
  writeFileSync(
    file,
    // With the side ports a server opens (OTLP/gRPC, remote workers): the rebuild opens neither.
    `data_dir: ${data}\nplugins: { games: {}, ingest: { signing_secret: cli-secret, otlp: { grpc: { enabled: true, port: ${freePort()} } } }, analytics: {}, notify: { workers: { remote: { enabled: true, port: ${freePort()}, token: wk-cli-rebuild-token } } } }\n`,
  )
  const env = { ADMIN_PASSWORD: 'cli-rebuild-pw' }
  const s = await startServer([process.execPath, main, '--config', file], env)
  try {
    const login = await fetch(`${s.base}/api/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'admin@localhost', password: 'cli-rebuild-pw' }),
    })
    const { token } = await login.json()
    const game = await fetch(`${s.base}/api/games`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({
        name: 'Cli Quest',
        genre: 'PUZZLE',
        platforms: ['WEB'],
        timezone: 'UTC',
        defaultCurrency: 'EUR',
      }),
    }).then((r) => r.json())
    const body = JSON.stringify(
      ['a', 'b', 'c'].map((uid) => ({
        event: 'login',
        ts: String(Date.now()),
        game_id: game.id,
        env: 'prod',
        uid,
      })),
    )
    const sent = await fetch(`${s.base}/api/ingest/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(await signRequest('cli-secret', body)) },
      body,
    })
    expect(sent.status).toBe(200)
    const p = Bun.spawn([process.execPath, main, 'rebuild', 'analytics', '--config', file], {
      stdout: 'pipe',
      stderr: 'pipe',
      env: { ...process.env, ...env, PORT: '0' },
    })
    const [out, code] = await Promise.all([new Response(p.stdout).text(), p.exited])
    expect(code).toBe(0)
    expect(out).toContain("rebuild of 'analytics' asked")
    expect(out).toMatch(/analytics: caught up, \d+ rows taken in, 0 behind/)
    const dau = await fetch(`${s.base}/api/v1/analytics/warehouse/dau?gameId=${game.id}&env=prod&days=1`, {
      headers: { authorization: `Bearer ${token}` },
    }).then((r) => r.json())
    expect(dau.points.at(-1).dau).toBe(3)
    const unknown = await run('rebuild', 'nope', '--config', file)
    expect(unknown.code).toBe(2)
    expect(unknown.err).toContain("no consumer 'nope'")
    const badDate = await run('rebuild', 'realtime', '--from', '2026-13-01', '--config', file)
    expect(badDate.code).toBe(2)
    expect(badDate.err).toContain('--from')
    // Every consumer rebuilds from a date now: today's results are recomputed, the same.
    const today = new Date().toISOString().slice(0, 10)
    const q = Bun.spawn([process.execPath, main, 'rebuild', 'analytics', '--from', today, '--config', file], {
      stdout: 'pipe',
      stderr: 'pipe',
      env: { ...process.env, ...env, PORT: '0' },
    })
    const [fromOut, fromCode] = await Promise.all([new Response(q.stdout).text(), q.exited])
    expect(fromCode).toBe(0)
    expect(fromOut).toContain(`rebuild of 'analytics' asked from ${today}`)
    expect(fromOut).toMatch(/analytics: caught up, \d+ rows taken in, 0 behind/)
    const again = await fetch(`${s.base}/api/v1/analytics/warehouse/dau?gameId=${game.id}&env=prod&days=1`, {
      headers: { authorization: `Bearer ${token}` },
    }).then((r) => r.json())
    expect(again.points.at(-1).dau).toBe(3)
  } finally {
    s.proc.kill('SIGTERM')
    await s.proc.exited
  }
}, 60_000)

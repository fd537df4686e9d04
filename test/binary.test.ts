import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ProtobufLogsSerializer } from '@opentelemetry/otlp-transformer'
import { PURGE_DELAY } from '../core/allocator'
import { freePort, logExporter, logRecords, send } from '../plugins/ingest/otlp/exporters'
import { sdkBundle } from '../scripts/sdk-bundle'
import { signRequest } from '../sdk/sign'
import { environ, startServer } from './process'

const SCALAR_FILE = `${import.meta.dir}/../node_modules/@scalar/api-reference/dist/browser/standalone.js`

/**
 * The compiled single binary, end to end: build it, start it on a temporary DATA_DIR with the
 * embedded default configuration, log in, create a game, ingest a signed event, read the API
 * docs and the health.
 */
describe('single binary', () => {
  const dir = mkdtempSync(join(tmpdir(), 'liveops-bin-'))
  const binary = join(dir, 'liveops')

  beforeAll(() => {
    const build = Bun.spawnSync([process.execPath, 'scripts/build.ts', `--outfile=${binary}`], {
      stdout: 'pipe',
      stderr: 'pipe',
    })
    if (build.exitCode !== 0) throw new Error(build.stderr.toString())
  }, 120_000)
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  test('starts on the embedded default, logs in, creates a game, serves /v3/api-docs and /healthz; SIGTERM drains', async () => {
    const dataDir = join(dir, 'data')
    const grpcPort = await freePort()
    // Run outside the repo so the embedded configuration, not config/liveops.yaml, is used.
    const s = await startServer(
      [binary],
      {
        DATA_DIR: dataDir,
        ADMIN_PASSWORD: 'binary-admin-pw',
        INGEST_SIGNING_SECRET: 'binary-secret',
        OTLP_GRPC_ENABLED: 'true',
        OTLP_GRPC_PORT: String(grpcPort),
      },
      { cwd: dir, unset: [PURGE_DELAY] },
    )
    try {
      expect(s.output()).toContain('embedded default')
      // It replaced itself (same pid) with one that keeps freed memory (core/allocator.ts).
      expect(environ(s.proc.pid)[PURGE_DELAY]).toBe('-1')
      expect(readFileSync(`/proc/${s.proc.pid}/cmdline`, 'utf8').split('\0').filter(Boolean)).toEqual([
        binary,
      ])
      const health = await fetch(`${s.base}/healthz`)
      expect(health.status).toBe(200)
      expect((await health.json()).checks.database.status).toBe('up')

      const login = await fetch(`${s.base}/api/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'admin@localhost', password: 'binary-admin-pw' }),
      })
      expect(login.status).toBe(200)
      const { token } = await login.json()
      const game = await fetch(`${s.base}/api/games`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({
          name: 'Binary Quest',
          genre: 'CASUAL',
          platforms: ['WEB'],
          timezone: 'UTC',
          defaultCurrency: 'USD',
        }),
      })
      if (game.status !== 201) console.error(s.output())
      expect(game.status).toBe(201)
      const { id } = await game.json()
      expect(
        (
          await (
            await fetch(`${s.base}/api/games/${id}`, { headers: { authorization: `Bearer ${token}` } })
          ).json()
        ).name,
      ).toBe('Binary Quest')

      // Signed ingestion commits on the persist thread, a second entrypoint of the binary.
      const events = JSON.stringify([
        { event: 'login', ts: String(Date.now()), game_id: id, env: 'prod', uid: 'u1' },
      ])
      const ingest = await fetch(`${s.base}/api/ingest/events`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(await signRequest('binary-secret', events)) },
        body: events,
      })
      if (ingest.status !== 200) console.error(s.output())
      expect(await ingest.json()).toEqual({ ok: true })
      // OTLP/HTTP protobuf: the .proto texts are embedded (text imports), none is read from disk.
      const otlp = ProtobufLogsSerializer.serializeRequest(
        await logRecords({ game_id: id, 'deployment.environment': 'dev' }, [
          { body: 'otlp_hello', attributes: { 'user.id': 'u2' } },
        ]),
      ) as Uint8Array<ArrayBuffer>
      const logs = await fetch(`${s.base}/v1/logs`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-protobuf', ...(await signRequest('binary-secret', otlp)) },
        body: otlp,
      })
      if (logs.status !== 200) console.error(s.output())
      expect([logs.status, logs.headers.get('content-type')]).toEqual([200, 'application/x-protobuf'])
      expect(ProtobufLogsSerializer.deserializeResponse(new Uint8Array(await logs.arrayBuffer()))).toEqual({})
      // OTLP/gRPC (grpc-js inside the binary), through the real exporter.
      const key = await fetch(`${s.base}/api/api-keys`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ name: 'otel', gameId: id, environment: 'dev' }),
      })
      const viaGrpc = await send(
        logExporter(
          'grpc',
          { http: s.base, grpc: `http://127.0.0.1:${grpcPort}` },
          { headers: { 'x-api-key': (await key.json()).key } },
        ),
        await logRecords({}, [{ body: 'otlp_hello', attributes: { 'user.id': 'u3' } }]),
      )
      expect(viaGrpc.error).toBeUndefined()
      const hello = await fetch(
        `${s.base}/api/v1/analytics/behavior/events?gameId=${id}&env=dev&event=otlp_hello`,
        { headers: { authorization: `Bearer ${token}` } },
      )
      expect((await hello.json()).total).toBe(2)
      const dau = await fetch(`${s.base}/api/v1/analytics/warehouse/dau?gameId=${id}&env=prod&days=1`, {
        headers: { authorization: `Bearer ${token}` },
      })
      expect((await dau.json()).points.at(-1).dau).toBe(1)
      // Paths walk the event store on the walk threads, a third entrypoint of the binary.
      const today = new Date().toISOString().slice(0, 10)
      const paths = await fetch(
        `${s.base}/api/v1/analytics/behavior/paths?gameId=${id}&env=prod&startDate=${today}&endDate=${today}`,
        { headers: { authorization: `Bearer ${token}` } },
      )
      expect((await paths.json()).paths).toEqual([{ path: ['login'], count: 1, share: 1 }])
      expect(s.output()).not.toContain('walk threads lost')

      // Elysia reads each hook's source; the minified auth hooks (core's, and the agents' token)
      // once made it print a warning asking the operator to report it, at their first request.
      const agent = await fetch(`${s.base}/api/v1/agents`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      })
      expect(agent.status).toBeGreaterThanOrEqual(400)
      expect(s.output()).not.toContain('[Sucrose]')

      const docs = await fetch(`${s.base}/v3/api-docs`)
      expect(docs.status).toBe(200)
      expect(Object.keys((await docs.json()).paths)).toContain('/api/games')
      // The /docs page's script is embedded in the binary (run here outside the repository).
      const page = await (await fetch(`${s.base}/docs`)).text()
      const src = page.match(/<script src="([^"]+)"/)?.[1]
      expect(src).toStartWith('/docs/assets/')
      const asset = await fetch(`${s.base}${src}`)
      expect(asset.status).toBe(200)
      expect((await asset.arrayBuffer()).byteLength).toBe(Bun.file(SCALAR_FILE).size)

      // The browser SDK (issue 38 point 5): bundled by a macro at build time, the same module as here.
      const sdk = await fetch(`${s.base}/sdk/liveops.js`)
      expect([sdk.status, sdk.headers.get('content-type')]).toEqual([200, 'text/javascript; charset=utf-8'])
      expect(await sdk.text()).toBe(sdkBundle())

      // The console (issue 37): Bun bundled console/index.html into the binary at build time.
      const consolePage = await fetch(`${s.base}/`)
      expect(consolePage.status).toBe(200)
      expect(consolePage.headers.get('cache-control')).toBe('no-cache')
      const html = await consolePage.text()
      const assets = [...html.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1])
      expect(assets.map((a) => a.split('.').pop()).sort()).toEqual(['css', 'js'])
      for (const path of assets) {
        const res = await fetch(`${s.base}${path}`)
        expect(res.status).toBe(200)
        expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable')
        expect(res.headers.get('content-encoding')).toBe('gzip')
        expect((await res.text()).length).toBeGreaterThan(1000)
      }

      // A request whose body is still arriving when SIGTERM lands must still be answered.
      let release!: () => void
      const gate = new Promise<void>((r) => {
        release = r
      })
      const body = new ReadableStream<Uint8Array>({
        async start(c) {
          c.enqueue(new TextEncoder().encode('{"email":"admin@localhost",'))
          await gate
          c.enqueue(new TextEncoder().encode('"password":"binary-admin-pw"}'))
          c.close()
        },
      })
      const inflight = fetch(`${s.base}/api/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        duplex: 'half',
      } as RequestInit)
      // A margin for the first bytes to reach the server (nothing observable says they did); the
      // rest of the body is sent only after the server said it is draining.
      await Bun.sleep(100)
      s.proc.kill('SIGTERM')
      const deadline = Date.now() + 5000
      while (!s.output().includes('SIGTERM: draining') && Date.now() < deadline) await Bun.sleep(10)
      expect(s.output()).toContain('SIGTERM: draining')
      release()
      const late = await inflight
      expect(late.status).toBe(200)
      expect(await s.proc.exited).toBe(0)
      expect(s.output()).toContain('stopped')
    } finally {
      s.proc.kill('SIGKILL')
    }
  }, 60_000)
})

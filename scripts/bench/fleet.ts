import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { signRequest } from '../../sdk/sign'
import { type Running, startServer } from '../../test/process'
import { tempDir } from './lib'

/** Server processes sharing one store (and Redis), as a balancer would see them. */
export interface Fleet {
  servers: Running[]
  /** The admin's access token (every instance accepts it). */
  token: string
  stop(signal?: 'SIGTERM' | 'SIGKILL'): Promise<void>
}

const root = join(import.meta.dir, '..', '..')
export const SIGNING_SECRET = 'bench-signing-secret'

/**
 * Starts `names.length` instances of `core/main.ts` on `databaseUrl` with `plugins` (the YAML's
 * `plugins:`), each with its own data directory and instance id, and logs in as the admin.
 */
export async function startFleet(opts: {
  names: string[]
  databaseUrl: string
  redisUrl?: string
  plugins: Record<string, unknown>
  core?: Record<string, unknown>
}): Promise<Fleet> {
  const servers: Running[] = []
  const dirs: string[] = []
  const cleanUp = () => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
  }
  try {
    for (const name of opts.names) {
      const dir = tempDir(`liveops-fleet-${name}-`)
      dirs.push(dir)
      const yaml = stringify({
        data_dir: dir,
        instance_id: name,
        rate_limit: { requests_per_minute: 0, burst: 0 },
        log: { level: 'info', requests: false },
        ...opts.core,
        plugins: opts.plugins,
      })
      await Bun.write(join(dir, 'fleet.yaml'), yaml)
      servers.push(
        await startServer(
          [process.execPath, 'core/main.ts', '--config', join(dir, 'fleet.yaml')],
          {
            DATABASE_URL: opts.databaseUrl,
            ADMIN_PASSWORD: 'bench-password',
            JWT_SECRET: 'bench-shared-jwt-secret',
            ...(opts.redisUrl ? { REDIS_URL: opts.redisUrl } : {}),
          },
          { cwd: root, timeoutMs: 30_000 },
        ),
      )
    }
    const login = await fetch(`${servers[0]!.base}/api/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'admin@localhost', password: 'bench-password' }),
    })
    const { token } = (await login.json()) as { token: string }
    return {
      servers,
      token,
      async stop(signal = 'SIGTERM') {
        for (const s of servers) s.proc.kill(signal)
        await Promise.all(servers.map((s) => s.proc.exited))
        cleanUp()
      },
    }
  } catch (e) {
    for (const s of servers) s.proc.kill('SIGKILL')
    await Promise.all(servers.map((s) => s.proc.exited))
    cleanUp()
    throw e
  }
}

/** A signed ingestion request of one event, as the SDK sends it. */
export async function ingestRequest(base: string, gameId: string, uid: string): Promise<Request> {
  const body = JSON.stringify([{ event: 'login', ts: String(Date.now()), game_id: gameId, env: 'prod', uid }])
  const sig = await signRequest(SIGNING_SECRET, body)
  return new Request(`${base}/api/ingest/events`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...sig },
    body,
  })
}

/** Makes a game through `base`; its id. */
export async function createGame(base: string, token: string): Promise<string> {
  const r = await fetch(`${base}/api/games`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      name: `bench-${crypto.randomUUID().slice(0, 8)}`,
      genre: 'RPG',
      platforms: ['WEB'],
      timezone: 'UTC',
      defaultCurrency: 'USD',
    }),
  })
  if (r.status !== 201) throw new Error(`creating a game answered ${r.status}: ${await r.text()}`)
  return ((await r.json()) as { id: string }).id
}

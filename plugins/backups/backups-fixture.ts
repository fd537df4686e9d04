import { afterAll, beforeAll, expect } from 'bun:test'
import { type Engine, type TestApp, makeApp, until } from '../../test/helpers'

/**
 * The backups plugin's tests: the backups-*.test.ts files beside this one (api: making, reading,
 * downloading and deleting; restore: a backup restored into a fresh store; schedule: failures,
 * retention, the schedule and the dump tools).
 */

export const sha256 = (b: Uint8Array) => new Bun.CryptoHasher('sha256').update(b).digest('hex')

/** Polls a backup until it leaves pending and running. */
async function finished(a: TestApp, token: string, id: string) {
  return until(async () => {
    const r = await a.req('GET', `/api/v1/backups/${id}`, { token })
    return ['succeeded', 'failed'].includes(r.body.data.status) ? r.body.data : undefined
  }, 15_000)
}

export async function backup(
  a: TestApp,
  token: string,
  body: Record<string, unknown> = { name: 'nightly drill', type: 'full' },
) {
  const r = await a.req('POST', '/api/v1/backups', { token, body })
  expect(r.status).toBe(202)
  expect(r.body.data.status).toBe('pending')
  expect(r.headers.get('location')).toBe(`/api/v1/backups/${r.body.data.id}`)
  return finished(a, token, r.body.data.id)
}

export async function download(a: TestApp, token: string, id: string) {
  const res = await a.app.handle(
    new Request(`http://localhost/api/v1/backups/${id}/download`, {
      headers: { authorization: `Bearer ${token}` },
    }),
  )
  return { res, bytes: new Uint8Array(await res.arrayBuffer()) }
}

/**
 * The app of the calling file's suite on `engine` (no schedule), started once: `fx.a` and
 * `fx.admin` once it began; it holds the analyst `drill@ironbark.example` that a restore must serve.
 */
export function backupsSuite(engine: Engine) {
  const fx = { a: undefined as unknown as TestApp, admin: '' }
  beforeAll(async () => {
    fx.a = await makeApp(engine, { plugins: { backups: { schedule_interval_s: 0 } } })
    fx.admin = await fx.a.token('admin')
    await fx.a.auth.createUser({
      email: 'drill@ironbark.example',
      username: 'restore-drill',
      password: 'drill-pass-7731',
      roles: ['analyst'],
    })
  })
  afterAll(() => fx.a.stop())
  return fx
}

import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, until } from '../helpers'
import { ADMIN_TOKEN, type Answer, type Call, GAME, client, login, makeUser, securityApp } from './lib'

/*
 * Audit sec2 M1: a change of trust reaches requests already in flight. The guard checks a token
 * when the request arrives and the write commits later (an Argon2 hash, hundreds of
 * milliseconds, runs in between): an admin disabled or demoted meanwhile still created admins
 * and tokens on PostgreSQL and MariaDB. Each write below is held after the route's checks, just
 * before the store's write, while the caller's trust changes; it must then be refused with 401
 * (as an expired token is) and write nothing. Without a change in between it succeeds.
 */
const admin = { 'x-admin-token': ADMIN_TOKEN }
const as = (token: string) => ({ authorization: `Bearer ${token}` })
let n = 0

/**
 * Holds the first call of `target[key]` that `when` accepts until `release()`, as the hash holds
 * a write on a slow server; `restore()` puts the method back.
 */
function hold<T extends object>(target: T, key: keyof T, when: (...args: unknown[]) => boolean = () => true) {
  const original = target[key] as (...args: unknown[]) => Promise<unknown>
  let entered = false
  let release = () => {}
  const gate = new Promise<void>((r) => {
    release = r
  })
  Object.assign(target, {
    [key]: async (...args: unknown[]) => {
      if (!entered && when(...args)) {
        entered = true
        await gate
      }
      return original.apply(target, args)
    },
  })
  return {
    entered: () => until(() => entered, { what: `${String(key)} held` }),
    release,
    restore: () => Object.assign(target, { [key]: original }),
  }
}

forEachEngine((engine) => {
  let app: TestApp
  let call: Call
  let gameId: string
  beforeAll(async () => {
    app = await securityApp(engine, { plugins: { games: {} } })
    call = client(app.listen())
    gameId = (await call('POST', '/api/games', { headers: admin, body: { name: 'in flight', ...GAME } })).body
      .id
  })
  afterAll(() => app.stop())

  const person = async (roles: string[]) => {
    const u = await makeUser(app, `f${++n}`, roles)
    return { id: u.id, ...(await login(call, u.email)) }
  }
  type Person = Awaited<ReturnType<typeof person>>

  const changes = {
    disabled: (z: Person) => call('POST', `/api/users/${z.id}/disable`, { headers: admin }),
    'demoted to viewer': (z: Person) =>
      call('PUT', `/api/users/${z.id}`, { headers: admin, body: { roles: ['viewer'] } }),
  }

  /**
   * A write the caller `z` sends: where it is held, the request, and whether it took effect.
   * `target`: the user it is about, when there is one.
   */
  interface Write {
    held: (target: Person | undefined) => ReturnType<typeof hold>
    send: (z: Person, name: string, target: Person | undefined) => Promise<Answer>
    done: (name: string, target: Person | undefined) => Promise<boolean>
    target?: string[]
  }
  const writes: Record<string, Write> = {
    'POST /api/users (an admin)': {
      held: () => hold(app.auth.users, 'create'),
      send: (z, name) =>
        call('POST', '/api/users', {
          headers: as(z.token),
          body: { email: `${name}@x.io`, password: 'password-123', roles: ['admin'] },
        }),
      done: async (name) => !!(await app.auth.users.find('email', `${name}@x.io`)),
    },
    'PUT /api/users/{id} (admin granted to a viewer)': {
      target: ['viewer'],
      held: (v) => hold(app.auth.users, 'update', (id) => id === v?.id),
      send: (z, _, v) =>
        call('PUT', `/api/users/${v?.id}`, { headers: as(z.token), body: { roles: ['admin'] } }),
      done: async (_, v) => (await app.auth.users.get(v?.id ?? '')).roles.includes('admin'),
    },
    'PUT /api/users/{id} (a password set)': {
      target: ['operator'],
      held: (v) => hold(app.auth.users, 'update', (id) => id === v?.id),
      send: (z, _, v) =>
        call('PUT', `/api/users/${v?.id}`, { headers: as(z.token), body: { password: 'taken-over-123' } }),
      done: async (_, v) => (await app.auth.users.get(v?.id ?? '')).tokenGen > 0,
    },
    'POST /api/v1/app-tokens (every scope)': {
      held: () => hold(app.auth.appTokens, 'create'),
      send: (z, name) =>
        call('POST', '/api/v1/app-tokens', {
          headers: as(z.token),
          body: { name, scopes: ['config', 'trigger', 'query'] },
        }),
      done: async (name) => (await app.auth.appTokens.list()).some((t) => t.name === name),
    },
    'POST /api/v1/server-keys': {
      held: () => hold(app.auth.serverKeys, 'create'),
      send: (z, name) =>
        call('POST', '/api/v1/server-keys', { headers: as(z.token), body: { name, scopes: ['query'] } }),
      done: async (name) => (await app.auth.serverKeys.list()).some((t) => t.name === name),
    },
    'POST /api/api-keys (an SDK key)': {
      held: () => hold(app.auth.sdkKeys, 'create'),
      send: (z, name) =>
        call('POST', '/api/api-keys', { headers: as(z.token), body: { name, gameId, environment: 'prod' } }),
      done: async (name) => (await app.auth.listApiKeys()).some((k) => k.name === name),
    },
  }

  for (const [what, w] of Object.entries(writes))
    describe(what, () => {
      /** Sends the write as admin `z`, holds it after its checks, runs `between`, lets it go on. */
      const race = async (between?: (z: Person) => Promise<Answer>) => {
        const z = await person(['admin'])
        const target = w.target ? await person(w.target) : undefined
        const name = `made${++n}`
        const held = w.held(target)
        try {
          const pending = w.send(z, name, target)
          await held.entered()
          if (between) expect((await between(z)).status).toBe(200)
          held.release()
          return { answer: await pending, done: await w.done(name, target) }
        } finally {
          held.restore()
        }
      }

      for (const [change, made] of Object.entries(changes))
        test(`the caller ${change} while it is in flight: 401, nothing written`, async () => {
          const { answer, done } = await race(made)
          expect(answer.status).toBe(401)
          expect(done).toBe(false)
        })

      test('no change in between: it is written', async () => {
        const { answer, done } = await race()
        expect(answer.status).toBeLessThan(300)
        expect(done).toBe(true)
      })
    })
})

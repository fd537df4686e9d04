import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import type { Db } from '../../core/db'
import { newId } from '../../core/db'
import { sha256Hex } from '../../core/digest'
import { type TestApp, forEachEngine, makeApp, until } from '../helpers'
import { ADMIN_TOKEN, type Call, PASSWORD, client, login, makeUser, securityApp } from './lib'

/*
 * Audit 19 "identity": a refresh token rotated during a sign-out or a password change survived
 * them (H1), a malformed `service_token` cookie was a 500 (L1), refresh tokens were never deleted
 * and their rotation was not rate-limited (L2).
 */
const admin = { 'x-admin-token': ADMIN_TOKEN }
const as = (token: string) => ({ authorization: `Bearer ${token}` })
let n = 0

/**
 * `db`, whose statements that `matches` (in its transactions too) wait, once `hold()` was called,
 * until released: a request stopped at that statement, as PostgreSQL leaves one waiting on the
 * network while others run. `paused` resolves with the connection it stopped on.
 */
function pausing(db: Db, matches: (sql: string) => boolean) {
  let held: { until: Promise<void>; stopped: (on: Db) => void } | undefined
  const wrap = (d: Db): Db =>
    new Proxy(d, {
      get(target, key) {
        if (key === 'tx') return <T>(fn: (tx: Db) => Promise<T>) => target.tx((tx) => fn(wrap(tx)))
        if (key === 'run' || key === 'get' || key === 'all')
          return async (sql: string, params?: unknown[]) => {
            if (held && matches(sql)) {
              const h = held
              held = undefined
              h.stopped(target)
              await h.until
            }
            return (target[key] as (s: string, p?: unknown[]) => Promise<unknown>)(sql, params)
          }
        const v = Reflect.get(target, key)
        return typeof v === 'function' ? v.bind(target) : v
      },
    })
  return {
    db: wrap(db),
    /** Stops the next matching statement; `release` lets it run. */
    hold() {
      let release = () => {}
      let stopped: (on: Db) => void = () => {}
      const paused = new Promise<Db>((r) => {
        stopped = r
      })
      held = {
        until: new Promise<void>((r) => {
          release = r
        }),
        stopped,
      }
      return { paused, release }
    },
  }
}

/** The store the login sessions of `app` write to, replaced by `db` (a test's `pausing`). */
const sessionsOf = (app: TestApp) => (app.auth as unknown as { sessions: { db: Db } }).sessions

/**
 * Whether another connection waits on a lock the connection `on` holds (it is in a transaction):
 * PostgreSQL's `pg_blocking_pids`; on MariaDB a statement that stays under way. False on SQLite.
 */
async function blocksAnother(app: TestApp, on: Db): Promise<() => Promise<boolean>> {
  if (app.engine === 'postgres') {
    const me = await on.get<{ pid: number }>('SELECT pg_backend_pid() AS pid')
    return async () =>
      !!(await app.db.get(
        'SELECT 1 AS x FROM pg_stat_activity WHERE CAST(? AS INTEGER) = ANY(pg_blocking_pids(pid))',
        [me?.pid ?? 0],
      ))
  }
  if (app.engine === 'mysql') {
    // MariaDB's lock tables (INNODB_LOCK_WAITS) list none of these waits: a statement of this
    // store's database still under way on a second look is one waiting.
    const me = await on.get<{ id: number }>('SELECT CONNECTION_ID() AS id')
    let last = ''
    return async () => {
      const r = await app.db.get<{ id: number; info: string }>(
        `SELECT ID AS id, INFO AS info FROM information_schema.PROCESSLIST
         WHERE ID <> ? AND DB = DATABASE() AND INFO IS NOT NULL AND INFO NOT LIKE '%PROCESSLIST%'`,
        [me?.id ?? 0],
      )
      const seen = r ? `${r.id} ${r.info}` : ''
      const again = !!r && seen === last
      last = seen
      if (!again) await Bun.sleep(20)
      return again
    }
  }
  return async () => false
}

/** Resolves once `done` settled or `blocked()` holds: which came first. */
async function settledOrBlocked(
  done: Promise<unknown>,
  blocked: () => Promise<boolean>,
): Promise<'settled' | 'blocked'> {
  let settled = false
  const mark = () => {
    settled = true
  }
  void done.then(mark, mark)
  for (;;) {
    if (settled) return 'settled'
    if (await blocked()) return 'blocked'
    await Bun.sleep(5)
  }
}

forEachEngine((engine) => {
  let app: TestApp
  let call: Call
  beforeAll(async () => {
    app = await securityApp(engine, { plugins: { games: {} } })
    call = client(app.listen())
  })
  afterAll(() => app.stop())

  const person = async (roles: string[]) => {
    const u = await makeUser(app, `a19-${++n}`, roles)
    return { id: u.id, email: u.email, ...(await login(call, u.email)) }
  }
  const refresh = (refreshToken: string) => call('POST', '/api/auth/refresh', { body: { refreshToken } })

  describe('H1: a refresh token being rotated does not outlive what ends its login', () => {
    /**
     * Rotates `victim`'s refresh token, stopped between its claim of the old token and the insert
     * of the new one, while `act` runs (a sign-out, a password change) until it finishes or waits
     * on a lock the rotation holds; then the rotation goes on. Answers what the rotation handed out.
     */
    const rotateDuring = async (victim: { refreshToken: string }, act: () => Promise<{ status: number }>) => {
      const sessions = sessionsOf(app)
      const real = sessions.db
      const p = pausing(real, (sql) => sql.startsWith('INSERT INTO refresh_tokens'))
      sessions.db = p.db
      const { paused, release } = p.hold()
      const rotating = refresh(victim.refreshToken)
      let acting: Promise<{ status: number }> | undefined
      try {
        const on = await paused
        acting = act()
        // It waits for the rotation (the lock on the user's row), which goes on after.
        expect(await settledOrBlocked(acting, await blocksAnother(app, on))).toBe('blocked')
      } finally {
        release()
        sessions.db = real
      }
      const [rotated, acted] = await Promise.all([rotating, acting])
      expect(acted.status).toBeLessThan(300)
      return rotated
    }
    const refused = async (rotated: { status: number; body: { token?: string; refreshToken?: string } }) => {
      // Refused at once, or handed out and then ended with the login.
      if (rotated.status !== 200) return expect(rotated.status).toBe(401)
      expect((await refresh(rotated.body.refreshToken ?? '')).status).toBe(401)
      expect((await call('GET', '/api/games', { headers: as(rotated.body.token ?? '') })).status).toBe(401)
    }

    test.skipIf(engine === 'sqlite')(
      'sign-out during a rotation ends the token the rotation issues',
      async () => {
        const victim = await person(['operator'])
        const rotated = await rotateDuring(victim, () =>
          call('POST', '/api/auth/logout', { headers: as(victim.token) }),
        )
        await refused(rotated)
      },
    )

    test.skipIf(engine === 'sqlite')(
      "an admin's password reset during a rotation ends its token",
      async () => {
        const victim = await person(['operator'])
        const rotated = await rotateDuring(victim, () =>
          call('PUT', `/api/users/${victim.id}`, { headers: admin, body: { password: 'a-new-password-1' } }),
        )
        await refused(rotated)
      },
    )

    test.skipIf(engine === 'sqlite')(
      "the user's own password change during a rotation ends its token",
      async () => {
        const victim = await person(['operator'])
        const rotated = await rotateDuring(victim, () =>
          call('PUT', `/api/users/${victim.id}`, {
            headers: as(victim.token),
            body: { password: 'a-new-password-2', currentPassword: PASSWORD },
          }),
        )
        await refused(rotated)
      },
    )

    test('a login whose password check preceded a password reset gets a refresh token the reset refuses', async () => {
      const u = await makeUser(app, `a19-${++n}`, ['viewer'])
      const sessions = sessionsOf(app)
      const real = sessions.db
      const p = pausing(real, (sql) => sql.startsWith('INSERT INTO refresh_tokens'))
      sessions.db = p.db
      let got: Awaited<ReturnType<Call>>
      try {
        const { paused, release } = p.hold()
        const signingIn = call('POST', '/api/auth/login', { body: { email: u.email, password: PASSWORD } })
        await paused
        const reset = await call('PUT', `/api/users/${u.id}`, {
          headers: admin,
          body: { password: 'a-new-password-3' },
        })
        expect(reset.status).toBe(200)
        release()
        got = await signingIn
      } finally {
        sessions.db = real
      }
      expect(got.status).toBe(200)
      expect((await refresh(got.body.refreshToken)).status).toBe(401)
      expect((await call('GET', '/api/games', { headers: as(got.body.token) })).status).toBe(401)
    })

    test('a live token of a login that has a revoked token is refused', async () => {
      // What a rotation racing a sign-out left before this release (the migration revokes those).
      const u = await person(['viewer'])
      const row = await app.db.get<{ family_id: string }>(
        'SELECT family_id FROM refresh_tokens WHERE token_hash = ?',
        [sha256Hex(u.refreshToken)],
      )
      const family = row?.family_id ?? ''
      await app.db.run(
        'INSERT INTO refresh_tokens (id, family_id, user_id, token_hash, expires_at, created_at, used_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
        [newId(), family, u.id, sha256Hex(randomBytes(32).toString('hex')), Date.now() + 60_000, 1, 1, 2],
      )
      expect((await refresh(u.refreshToken)).status).toBe(401)
    })
  })

  test('L1: a malformed service_token cookie is no credential: 401 on a guarded route, /healthz answers', async () => {
    const cookie = { cookie: 'service_token=%E0%A4%A' }
    const r = await call('GET', '/api/games', { headers: cookie })
    expect(r.status).toBe(401)
    expect(JSON.stringify(r.body)).not.toContain('URIError')
    expect((await call('GET', '/healthz', { headers: cookie })).status).toBe(200)
  })

  describe('L2: refresh tokens', () => {
    test('the spec 2 login stores no refresh token; its sign-out is recorded, and a later instance refuses its token', async () => {
      const u = await makeUser(app, `a19-${++n}`, ['viewer'])
      const count = async () =>
        Number(
          (
            await app.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM refresh_tokens WHERE user_id = ?', [
              u.id,
            ])
          )?.n,
        )
      const r = await call('POST', '/api/v1/auth/login', {
        body: { username: u.username, password: PASSWORD },
      })
      expect(r.status).toBe(200)
      expect(await count()).toBe(0)
      expect((await call('POST', '/api/auth/logout', { headers: as(r.body.token) })).status).toBe(204)
      expect(await count()).toBe(1)
      const family = JSON.parse(Buffer.from(r.body.token.split('.')[1], 'base64url').toString()).fam
      const revoked = await app.db.get(
        'SELECT 1 AS x FROM refresh_tokens WHERE family_id = ? AND revoked_at IS NOT NULL',
        [family],
      )
      expect(revoked).toBeTruthy()
      // An instance started after the sign-out reads it from the store (a SQLite file has one).
      if (engine === 'sqlite') return
      const later = await makeApp(engine, { store: app, plugins: { games: {} } })
      try {
        expect((await later.req('GET', '/api/v1/auth/me', { token: r.body.token })).status).toBe(401)
      } finally {
        await later.stop()
      }
    })

    test('the purge deletes expired tokens and those revoked over a day ago, and keeps the rest', async () => {
      const u = await makeUser(app, `a19-${++n}`, ['viewer'])
      const now = Date.now()
      const day = 24 * 3600 * 1000
      const rows: Record<string, [number, number | null, number | null]> = {
        // expires_at, used_at, revoked_at
        expired: [now - 1, null, null],
        revokedLongAgo: [now + day, null, now - 2 * day],
        live: [now + day, null, null],
        used: [now + day, now - 2 * day, null],
        revokedLately: [now + day, null, now - 1000],
      }
      for (const [name, [expires, used, revoked]] of Object.entries(rows))
        await app.db.run(
          'INSERT INTO refresh_tokens (id, family_id, user_id, token_hash, expires_at, created_at, used_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
          [newId(), newId(), u.id, `${name}-${u.id}`, expires, now - 3 * day, used, revoked],
        )
      await app.auth.purgeRefreshTokens()
      const left = await app.db.all<{ token_hash: string }>(
        'SELECT token_hash FROM refresh_tokens WHERE user_id = ? ORDER BY token_hash',
        [u.id],
      )
      expect(left.map((r) => r.token_hash.split('-')[0])).toEqual(['live', 'revokedLately', 'used'])
    })

    test('the purge is a job of the core schedule, run at start', async () => {
      const job = async () => {
        const h = await call('GET', '/healthz', { headers: admin })
        return h.body.checks.schedule.jobs['auth.refresh-token-purge']
      }
      expect(await job()).toBeDefined()
      await until(async () => (await job()).runs >= 1)
      expect((await job()).last_error).toBeNull()
    })
  })
})

forEachEngine((engine) => {
  let app: TestApp
  let call: Call
  const started = Date.now()
  beforeAll(async () => {
    app = await securityApp(engine, {
      plugins: { games: {} },
      config: { rate_limit: { requests_per_minute: 4, burst: 0 } },
      // One minute window for the whole test, wherever in a minute it starts.
      clock: () => started,
    })
    call = client(app.listen())
  })
  afterAll(() => app.stop())

  test("L2: a refresh counts in its user's rate-limit budget; one refused for it leaves the token good", async () => {
    const u = await makeUser(app, 'a19-limited', ['viewer'])
    let s = await login(call, u.email)
    // Two calls of the user's and two rotations spend the budget of 4 a minute.
    for (let i = 0; i < 2; i++)
      expect((await call('GET', '/api/games', { headers: as(s.token) })).status).toBe(200)
    for (let i = 0; i < 2; i++) {
      const r = await call('POST', '/api/auth/refresh', { body: { refreshToken: s.refreshToken } })
      expect(r.status).toBe(200)
      s = r.body
    }
    const over = await call('POST', '/api/auth/refresh', { body: { refreshToken: s.refreshToken } })
    expect(over.status).toBe(429)
    expect(over.headers.get('retry-after')).toBeTruthy()
    // Not claimed: the same token still rotates once the budget allows (not answered as reused).
    const row = await app.db.get<{ used_at: number | null; revoked_at: number | null }>(
      'SELECT used_at, revoked_at FROM refresh_tokens WHERE token_hash = ?',
      [sha256Hex(s.refreshToken)],
    )
    expect(row).toEqual({ used_at: null, revoked_at: null })
    expect((await call('POST', '/api/v1/auth/refresh', { headers: as(s.token) })).status).toBe(429)
  })
})

import { afterAll, beforeAll, expect, test } from 'bun:test'
import { connect } from 'node:net'
import { DUMMY_HASH } from '../../core/auth/service'
import { LoginThrottle } from '../../core/auth/throttle'
import type { Logger } from '../../core/log'
import { ADMIN_PASSWORD, type TestApp, engineFree, forEachEngine, makeApp } from '../helpers'

// Issue 15 point 5: failed logins are limited per account and per client address, unknown
// accounts cost what known ones do, and the refresh routes are held the same way.

// Every login verifies an argon2id hash (~100 ms on a loaded machine).
const SLOW = 60_000
/** Failures an address may make on the real-connection tests' app (`untrusting`). */
const DIRECT_FAILURES = 5
const OWNER = { email: 'Quinta.Owner@Example.org', username: 'quinta', password: 'correct-horse-77' }

forEachEngine((engine) => {
  let a: TestApp
  let clock = Date.parse('2031-03-04T05:06:07Z')
  beforeAll(async () => {
    // Addresses come from X-Forwarded-For here so one test can be many clients.
    a = await makeApp(engine, { plugins: { games: {} }, config: { server: { trust_forwarded_for: true } } })
    a.auth.throttle.now = () => clock
    await a.auth.createUser({ ...OWNER, roles: ['viewer'] })
  })
  /**
   * The app both real-connection tests use, made once: X-Forwarded-For not trusted (the default),
   * and an address held after DIRECT_FAILURES failures instead of the default 20 (the spray test
   * above holds the default): they show which address is counted, and each failure is an Argon2id
   * verification.
   */
  let direct: TestApp | undefined
  const untrusting = async () => {
    direct ??= await makeApp(engine, {
      plugins: { games: {} },
      config: { auth: { login_throttle: { address_failures: DIRECT_FAILURES } } },
    })
    return direct
  }
  afterAll(async () => {
    await a.stop()
    await direct?.stop()
  })

  const from = (ip: string) => ({ 'x-forwarded-for': `203.0.113.250, ${ip}` })
  const login = (email: string, password: string, ip: string) =>
    a.req('POST', '/api/auth/login', { body: { email, password }, headers: from(ip) })
  const v1login = (username: string, password: string, ip: string) =>
    a.req('POST', '/api/v1/auth/login', { body: { username, password }, headers: from(ip) })
  const tick = (s: number) => {
    clock += s * 1000
  }

  test(
    'guesses sent all at once are counted as they come: five 401s, then 429 for the rest, the right password among them',
    async () => {
      const ip = '198.51.100.60'
      const other = {
        email: 'burst.owner@example.org',
        username: 'burst-owner',
        password: 'burst-right-5531',
      }
      await a.auth.createUser({ ...other, roles: ['viewer'] })
      const answers = await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          login(other.email, i === 29 ? other.password : `guess-${i}`, ip),
        ),
      )
      const statuses = answers.map((r) => r.status)
      expect(statuses.filter((s) => s === 401)).toHaveLength(5)
      expect(statuses.filter((s) => s === 429)).toHaveLength(25)
      tick(3600)
    },
    SLOW,
  )

  test(
    'a stolen session guessing its own current password (to change it) is counted as logins are, and locks them',
    async () => {
      const ip = '198.51.100.61'
      const op = { email: 'stolen.op@example.org', username: 'stolen-op', password: 'op-right-7781' }
      const { id } = await a.auth.createUser({ ...op, roles: ['operator'] })
      const token = (await login(op.email, op.password, ip)).body.token
      const guess = (currentPassword: string) =>
        a.req('PUT', `/api/users/${id}`, {
          token,
          headers: from(ip),
          body: { password: 'taken-over-123', currentPassword },
        })
      const answers: number[] = []
      for (let i = 0; i < 7; i++) answers.push((await guess(`guess-${i}`)).status)
      expect(answers.slice(0, 4)).toEqual([403, 403, 403, 403])
      expect(answers.slice(5)).toEqual([429, 429])
      // Locked: the right one is not checked, and the account's login from there waits too.
      expect((await guess(op.password)).status).toBe(429)
      expect((await login(op.email, op.password, ip)).status).toBe(429)
      tick(3600)
    },
    SLOW,
  )

  test(
    'one address guessing one account: 401 four times, then 429 with a doubling Retry-After, even for the right password',
    async () => {
      const ip = '198.51.100.7'
      for (let i = 0; i < 5; i++) expect((await login(OWNER.email, `guess-${i}`, ip)).status).toBe(401)
      const locked = await login(OWNER.email, OWNER.password, ip)
      expect(locked.status).toBe(429)
      expect(locked.headers.get('retry-after')).toBe('1')
      expect(locked.body).toMatchObject({ error: 'too_many_attempts', path: '/api/auth/login' })
      // The username login is the same account: held too, with the envelope of its family.
      const v1 = await v1login(OWNER.username, OWNER.password, ip)
      expect(v1.status).toBe(429)
      expect(v1.body.code).toBe(429)
      const retries: number[] = []
      for (let i = 0; i < 4; i++) {
        tick(Number(locked.headers.get('retry-after')) * 2 ** i)
        expect((await login(OWNER.email, `again-${i}`, ip)).status).toBe(401)
        retries.push(Number((await login(OWNER.email, 'x', ip)).headers.get('retry-after')))
      }
      expect(retries).toEqual([2, 4, 8, 16])
      tick(16)
      expect((await login(OWNER.email.toUpperCase(), OWNER.password, ip)).status).toBe(200)
      // Success restarts the count: the next wrong password is a plain 401 again.
      expect((await login(OWNER.email, 'wrong', ip)).status).toBe(401)
    },
    SLOW,
  )

  test(
    'a guesser spread over many addresses holds the account for at most a minute, and never for the owner',
    async () => {
      const home = '192.0.2.44'
      expect((await v1login(OWNER.username, OWNER.password, home)).status).toBe(200)
      let maxRetry = 0
      for (let i = 0; i < 24; i++) {
        const r = await login(OWNER.email, `spray-${i}`, `100.64.${i}.9`)
        if (r.status === 429) {
          maxRetry = Math.max(maxRetry, Number(r.headers.get('retry-after')))
          tick(Number(r.headers.get('retry-after')))
        } else expect(r.status).toBe(401)
      }
      expect(maxRetry).toBeGreaterThan(1)
      expect(maxRetry).toBeLessThanOrEqual(60)
      // One more failure (or refusal) leaves the account locked right now.
      await login(OWNER.email, 'one-more', '100.64.199.1')
      const stranger = await login(OWNER.email, OWNER.password, '100.64.200.1')
      expect(stranger.status).toBe(429)
      expect(Number(stranger.headers.get('retry-after'))).toBeLessThanOrEqual(60)
      // The owner's own address is not held by the attack on the account.
      expect((await login(OWNER.email, OWNER.password, home)).status).toBe(200)
      tick(61)
    },
    SLOW,
  )

  test(
    'one address spraying many accounts is held after 20 failures, other addresses are not',
    async () => {
      const ip = '198.51.100.99'
      for (let i = 0; i < 20; i++)
        expect((await login(`nobody-${i}@example.net`, 'Winter2031!', ip)).status).toBe(401)
      const r = await login('someone-else@example.net', 'Winter2031!', ip)
      expect(r.status).toBe(429)
      expect(r.headers.get('retry-after')).toBe('1')
      // The refresh routes from that address are held as well.
      expect(
        (
          await a.req('POST', '/api/auth/refresh', {
            body: { refreshToken: 'x'.repeat(43) },
            headers: from(ip),
          })
        ).status,
      ).toBe(429)
      expect((await login(OWNER.email, OWNER.password, '198.51.100.100')).status).toBe(200)
    },
    SLOW,
  )

  test(
    'refresh-token guessing on both refresh routes counts against the address',
    async () => {
      const ip = '198.51.100.123'
      for (let i = 0; i < 10; i++) {
        const r1 = await a.req('POST', '/api/auth/refresh', {
          body: { refreshToken: `guess-${i}-${'q'.repeat(30)}` },
          headers: from(ip),
        })
        expect(r1.status).toBe(401)
        const r2 = await a.req('POST', '/api/v1/auth/refresh', {
          headers: { ...from(ip), authorization: `Bearer forged.${i}.x` },
        })
        expect(r2.status).toBe(401)
      }
      const held = await a.req('POST', '/api/v1/auth/refresh', {
        headers: { ...from(ip), authorization: 'Bearer a.b.c' },
      })
      expect(held.status).toBe(429)
      expect(held.body.code).toBe(429)
      expect(held.headers.get('retry-after')).toBe('1')
      // A real token from a clean address still refreshes.
      const ok = await login(OWNER.email, OWNER.password, '198.51.100.124')
      const r = await a.req('POST', '/api/auth/refresh', {
        body: { refreshToken: ok.body.refreshToken },
        headers: from('198.51.100.124'),
      })
      expect(r.status).toBe(200)
    },
    SLOW,
  )

  test(
    'an unknown email takes as long as a wrong password for a known one',
    async () => {
      const time = async (email: string, ip: string) => {
        const t0 = performance.now()
        expect((await login(email, 'not-the-password', ip)).status).toBe(401)
        return performance.now() - t0
      }
      const known: number[] = []
      const unknown: number[] = []
      for (let i = 0; i < 7; i++) {
        // A fresh address each round and at most 3 failures per account: no lock gets in the way.
        tick(1)
        if (i % 3 === 0) await login(OWNER.email, OWNER.password, `10.1.${i}.1`)
        known.push(await time(OWNER.email, `10.1.${i}.2`))
        unknown.push(await time(`ghost-${i}@example.net`, `10.1.${i}.3`))
      }
      const median = (xs: number[]) => xs.sort((x, y) => x - y)[Math.floor(xs.length / 2)]!
      const ratio = median(unknown) / median(known)
      expect(ratio).toBeGreaterThan(0.5)
      expect(ratio).toBeLessThan(2)
    },
    SLOW,
  )

  test(
    'without a proxy, the socket address is the client: locked over a real connection',
    async () => {
      // Its socket address is 127.0.0.1, which the next test leaves alone (127.0.0.2 and .3).
      const base = (await untrusting()).listen()
      const post = (email: string, headers: Record<string, string> = {}) =>
        fetch(`${base}/api/auth/login`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body: JSON.stringify({ email, password: 'nope-nope' }),
        })
      for (let i = 0; i < DIRECT_FAILURES; i++) expect((await post(`sock-${i}@example.net`)).status).toBe(401)
      // X-Forwarded-For is not trusted by default: a forged header does not escape the lock.
      const r = await post('sock-x@example.net', { 'x-forwarded-for': '10.9.8.7' })
      expect(r.status).toBe(429)
      expect(r.headers.get('retry-after')).toBe('1')
    },
    SLOW,
  )
  test(
    'over a real connection each client is its own address: one locked, another still logs in',
    async () => {
      const base = new URL((await untrusting()).listen())
      // The whole of 127/8 is loopback on Linux: two source addresses, two clients.
      const post = (from: string, email: string, password = 'nope-nope') =>
        new Promise<number>((resolve, reject) => {
          const body = JSON.stringify({ email, password })
          const head = 'POST /api/auth/login HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json'
          const socket = connect({ host: base.hostname, port: Number(base.port), localAddress: from }, () =>
            socket.write(
              `${head}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
            ),
          )
          let text = ''
          socket.on('data', (d) => {
            text += d
          })
          socket.on('error', reject)
          socket.on('close', () => resolve(Number(text.split(' ')[1])))
        })
      for (let i = 0; i < DIRECT_FAILURES; i++)
        expect(await post('127.0.0.2', `spray-${i}@example.net`)).toBe(401)
      expect(await post('127.0.0.2', 'spray-x@example.net')).toBe(429)
      // Another address is not held by that lock (every client once read as one 'unknown').
      expect(await post('127.0.0.3', 'spray-y@example.net')).toBe(401)
      expect(await post('127.0.0.3', 'admin@localhost', ADMIN_PASSWORD)).toBe(200)
    },
    SLOW,
  )
})

engineFree('the dummy hash', () => {
  test("has the parameters of every user's hash, so verifying it takes as long", async () => {
    const params = (h: string) => h.split('$').slice(1, 4).join('$')
    expect(params(DUMMY_HASH)).toBe(params(await Bun.password.hash('any password at all')))
    expect(await Bun.password.verify('', DUMMY_HASH)).toBe(false)
  })
})

engineFree('logging', () => {
  test(
    'failed logins and lockouts are logged with the account and address, never the password',
    async () => {
      const records: Array<[string, string, Record<string, unknown>]> = []
      const rec =
        (level: string) =>
        (msg: string, fields: Record<string, unknown> = {}) =>
          records.push([level, msg, fields])
      const log: Logger = {
        debug: rec('debug'),
        info: rec('info'),
        warn: rec('warn'),
        error: rec('error'),
        child: () => log,
      }
      const th = new LoginThrottle(
        { account_failures: 2, address_failures: 50, max_lock_s: 30, account_max_lock_s: 9 },
        log,
      )
      await th.fail('192.0.2.1', 'login', 'acct-1')
      await th.fail('192.0.2.1', 'login', 'acct-1')
      expect(records.filter(([, m]) => m === 'login failed')).toHaveLength(2)
      const locks = records.filter(([, m]) => m === 'login locked out')
      expect(locks.map(([l, , f]) => [l, f.scope, f.account, f.address, f.lock_s])).toEqual([
        ['warn', 'account from address', 'acct-1', '192.0.2.1', 1],
        ['warn', 'account', 'acct-1', '192.0.2.1', 1],
      ])
      await expect(th.check('192.0.2.1', 'acct-1')).rejects.toThrow('too many failed attempts')
      expect(await th.check('192.0.2.2', 'acct-2')).toBeUndefined()
    },
    SLOW,
  )
})

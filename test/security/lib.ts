import { signJwt } from '../../core/auth/jwt'
import { signRequest } from '../../sdk/sign'
import { type Engine, type MakeAppOptions, TEST_JWT_SECRET, type TestApp, makeApp } from '../helpers'

/*
 * Shared by the attack suite (`test/security/*.test.ts`): a real server on a loopback socket,
 * a client that speaks to it the way an attacker would, and one credential of every kind.
 */

export const ADMIN_TOKEN = 'test-admin-token'
export const AGENT_TOKEN = 'security-agent-token'
export const SIGNING_SECRET = 'security-signing-secret'
/** A game to create (with a name) and a runnable experiment config. */
export const GAME = { genre: 'RPG', platforms: ['IOS'], timezone: 'UTC', defaultCurrency: 'USD' }
export const CONFIG = {
  variants: [
    { name: 'a', weight: 50 },
    { name: 'b', weight: 50 },
  ],
}
/** A password every user made by `makeUser` has, for tests that log in for real. */
export const PASSWORD = 'password-123'

/**
 * Every shipped plugin, with the settings that make each credential meaningful: an agent token,
 * an ingestion signing secret, a chat-card verification token (which no credential of the suite
 * carries, so the callback refuses them all). Login throttling is lifted (the suite sends many bad tokens from
 * one address on purpose).
 */
export const SECURITY_APP: MakeAppOptions = {
  config: { auth: { login_throttle: { address_failures: 100_000, account_failures: 100_000 } } },
}
export function securityApp(engine: Engine, extra: MakeAppOptions = {}): Promise<TestApp> {
  return makeApp(engine, {
    ...SECURITY_APP,
    ...extra,
    config: { ...SECURITY_APP.config, ...extra.config },
    plugins: extra.plugins ?? allPluginsWith(),
  })
}

/** Every plugin enabled, agents and ingest configured for the suite. */
export function allPluginsWith(): Record<string, unknown> {
  return {
    games: {},
    experiments: {},
    ingest: { signing_secret: SIGNING_SECRET, purge_interval_minutes: 0 },
    analytics: {},
    ml: { drift_check_minutes: 0 },
    notify: { channels: { audit: { type: 'log' } } },
    agents: { token: AGENT_TOKEN },
    rules: { chatcard: { verification_token: 'vt-security-suite' } },
    rosters: {},
    audit: {},
    'rate-limits': {},
    site: {},
    'ops-alerts': { eval_interval_s: 0 },
    'webhook-provider': {},
    'smtp-provider': {},
    certificates: { check_interval_s: 0 },
    backups: { schedule_interval_s: 0 },
  }
}

// biome-ignore lint/suspicious/noExplicitAny: response bodies are JSON of every shape; the assertions check them
export type Body = any
export interface Answer {
  status: number
  body: Body
  headers: Headers
}
export type Call = (
  method: string,
  path: string,
  o?: { headers?: Record<string, string>; body?: unknown; raw?: string },
) => Promise<Answer>

/**
 * A client of a listening server. A JSON body is sent as JSON; an event stream's body is not
 * waited for (its status and headers are the answer).
 */
export function client(base: string): Call {
  return async (method, path, o = {}) => {
    const headers: Record<string, string> = { ...o.headers }
    let body: string | undefined = o.raw
    if (o.body !== undefined) {
      headers['content-type'] ??= 'application/json'
      body = JSON.stringify(o.body)
    }
    const res = await fetch(base + path, { method, headers, body, redirect: 'manual' })
    if ((res.headers.get('content-type') ?? '').includes('event-stream')) {
      await res.body?.cancel()
      return { status: res.status, body: undefined, headers: res.headers }
    }
    const text = await res.text()
    let parsed: Body = text
    if ((res.headers.get('content-type') ?? '').includes('json') && text) parsed = JSON.parse(text)
    return { status: res.status, body: parsed, headers: res.headers }
  }
}

/** Runs `fn` over `items` with at most `limit` in flight, answers in order. */
export async function inParallel<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length)
  let next = 0
  const worker = async () => {
    for (let i = next++; i < items.length; i = next++) out[i] = await fn(items[i])
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
  return out
}

/**
 * A user with `roles` and the password `PASSWORD`, made without an Argon2 hash per user (the
 * store gets one hash for every such user): the suite makes many.
 */
let passwordHash: Promise<string> | undefined
export async function makeUser(app: TestApp, name: string, roles: string[]) {
  passwordHash ??= Bun.password.hash(PASSWORD)
  return app.auth.createUser(
    { email: `${name}@security.test`, username: name, password: PASSWORD, roles },
    passwordHash,
  )
}

/** An access token for `user` in a real login family (as a login would make), with its refresh token. */
export async function session(
  app: TestApp,
  userId: string,
): Promise<{ token: string; refreshToken: string }> {
  return app.auth.issue(await app.auth.users.get(userId))
}

/** Logs in over HTTP (spec 1). */
export async function login(call: Call, email: string, password = PASSWORD) {
  const r = await call('POST', '/api/auth/login', { body: { email, password } })
  if (r.status !== 200) throw new Error(`login of ${email} answered ${r.status}: ${JSON.stringify(r.body)}`)
  return r.body as { token: string; refreshToken: string; user: { id: string } }
}

/** A JWT that looks like an admin's access token but is signed with another secret. */
export function forgedToken(): string {
  const now = Math.floor(Date.now() / 1000)
  return signJwt(
    { typ: 'access', sub: 'forged', username: 'admin', roles: ['admin'], gen: 0, iat: now, exp: now + 600 },
    'not-the-secret',
  )
}

/** A token signed with the server's secret (`makeApp`'s) that expired a minute ago. */
export function expiredToken(userId: string): string {
  const now = Math.floor(Date.now() / 1000)
  return signJwt(
    { typ: 'access', sub: userId, username: 'x', roles: ['admin'], gen: 0, iat: now - 960, exp: now - 60 },
    TEST_JWT_SECRET,
  )
}

/** The ingestion signature headers of `body`. */
export async function signature(body: string, secret = SIGNING_SECRET): Promise<Record<string, string>> {
  return { ...(await signRequest(secret, body)) }
}

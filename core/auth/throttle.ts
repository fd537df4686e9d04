import { TooManyRequests } from '../http'
import type { Logger } from '../log'
import { clientIp } from '../request'
import { type Count, MemoryState } from '../shared'

export interface ThrottleSettings {
  /** Failed logins for one account (from one address, or in all) before each further one locks it. */
  account_failures: number
  /** Failed logins and refreshes from one client address, over every account, before it is locked. */
  address_failures: number
  /** Longest lock of an address, or of an account for the address that keeps failing on it. */
  max_lock_s: number
  /**
   * Longest lock of an account for addresses that never logged into it: short, so an attacker
   * cannot keep the owner out for long; addresses that did log in are never held by it.
   */
  account_max_lock_s: number
}

type Awaitable<T> = T | Promise<T>

/** What the throttle keeps its counters and locks in: core's `SharedState`, or one process's `MemoryState`. */
export interface ThrottleStore {
  addAll(counts: Count[], opts?: { slide?: boolean }): Awaitable<number[]>
  get(keys: string[]): Awaitable<Array<number | undefined>>
  put(key: string, value: number, ttlMs: number): Awaitable<void>
  remove(keys: string[]): Awaitable<void>
}

/** Password checks from one address at once in a process; more wait their turn (`attempt`). */
const ADDRESS_IN_FLIGHT = 4

/** Failures older than this (since the last one, or the end of a longer lock) are forgotten. */
const WINDOW_MS = 15 * 60_000
/** An address that logged into an account is remembered for it this long. */
const KNOWN_MS = 30 * 24 * 3600_000

const failures = (key: string) => `throttle:f:${key}`
const lock = (key: string) => `throttle:l:${key}`
const known = (account: string, address: string) => `throttle:k:${account}\n${address}`

/**
 * Login abuse control. Three counters, each with an exponential backoff once past its threshold
 * (1 s, 2 s, 4 s ... up to its cap):
 * - the account from one address: a guesser at one address is held back for up to `max_lock_s`;
 * - the address over every account (spraying one password across many accounts, refresh-token
 *   guessing): up to `max_lock_s`;
 * - the account from anywhere (a guesser spread over many addresses): at most
 *   `account_max_lock_s`, and never for an address that logged into that account before.
 * While locked, attempts are refused with 429 and Retry-After without checking the password, so
 * a lock cannot be used to test guesses and waiting it out is the only way on.
 *
 * The counters, the locks and the known addresses live in the state every instance shares (Redis,
 * else the database: core/shared.ts), so a lockout started through one instance holds on all of
 * them and across restarts; with Redis down each instance counts alone (never refusing for that).
 * A lock stores the time it ends by this throttle's clock (`now`, which tests move); counters
 * expire by the store's own clock a window after their last failure.
 */
export class LoginThrottle {
  /** The clock; tests move it. */
  now: () => number = Date.now
  /** Password checks of an account in this process, one after another (`attempt`). */
  private readonly accounts = new Map<string, Promise<unknown>>()
  /** Password checks running from each address in this process, and those waiting for a turn. */
  private readonly addresses = new Map<string, { running: number; waiting: Array<() => void> }>()

  /**
   * Runs one login attempt (its `check`, the password's verification, its `fail` or `succeed`)
   * after the attempts on the same account before it, and at most `ADDRESS_IN_FLIGHT` at once
   * from one address. A failure is counted only once its password was checked (~100 ms): 60
   * guesses sent at once had all passed `check` before the first was counted, and the right one
   * among them logged in past a lockout of 5.
   */
  async attempt<T>(address: string, account: string, fn: () => Promise<T>): Promise<T> {
    const slot = this.addresses.get(address) ?? { running: 0, waiting: [] }
    this.addresses.set(address, slot)
    if (slot.running >= ADDRESS_IN_FLIGHT) await new Promise<void>((r) => slot.waiting.push(r))
    else slot.running++
    const before = this.accounts.get(account) ?? Promise.resolve()
    const run = before.then(fn)
    const done = run.catch(() => undefined)
    this.accounts.set(account, done)
    try {
      return await run
    } finally {
      if (this.accounts.get(account) === done) this.accounts.delete(account)
      const next = slot.waiting.shift()
      if (next) next()
      else if (--slot.running === 0) this.addresses.delete(address)
    }
  }

  constructor(
    private settings: ThrottleSettings,
    private log: Logger,
    private store: ThrottleStore = new MemoryState(),
  ) {}

  /** Throws 429 when `address` (and, for a login, the account) is locked. */
  async check(address: string, account?: string): Promise<void> {
    const now = this.now()
    const keys = [lock(`addr\n${address}`)]
    if (account !== undefined)
      keys.push(lock(`pair\n${account}\n${address}`), lock(`acct\n${account}`), known(account, address))
    const [addr, pair, acct, isKnown] = await this.store.get(keys)
    const until = Math.max(addr ?? 0, pair ?? 0, isKnown ? 0 : (acct ?? 0))
    const ms = until - now
    if (ms <= 0) return
    const seconds = Math.ceil(ms / 1000)
    throw new TooManyRequests(`too many failed attempts; retry in ${seconds} s`, seconds, 'too_many_attempts')
  }

  /** Counts a failed attempt and logs it, and the lock it starts when it starts one. */
  async fail(address: string, what: string, account?: string): Promise<void> {
    const now = this.now()
    const s = this.settings
    const bumps: Array<[string, string, number, number]> = [
      ['address', `addr\n${address}`, s.address_failures, s.max_lock_s],
    ]
    if (account !== undefined) {
      bumps.push(['account from address', `pair\n${account}\n${address}`, s.account_failures, s.max_lock_s])
      bumps.push(['account', `acct\n${account}`, s.account_failures, s.account_max_lock_s])
    }
    const windowMs = (capS: number) => Math.max(WINDOW_MS, capS * 1000)
    const totals = await this.store.addAll(
      bumps.map(([, key, , capS]) => ({ key: failures(key), windowMs: windowMs(capS) })),
      { slide: true },
    )
    let most = 0
    const locks: Array<Awaitable<void>> = []
    bumps.forEach(([scope, key, threshold, capS], i) => {
      const n = totals[i]!
      if (scope !== 'address') most = Math.max(most, n)
      if (n < threshold) return
      const lockS = Math.min(capS, 2 ** Math.min(30, n - threshold))
      locks.push(this.store.put(lock(key), now + lockS * 1000, windowMs(capS)))
      this.log.warn('login locked out', { scope, account, address, failures: n, lock_s: lockS })
    })
    await Promise.all(locks)
    this.log.warn(`${what} failed`, {
      account,
      address,
      failures: account === undefined ? undefined : most,
    })
  }

  /** A successful login: the account's counters and locks restart and the address is known to it. */
  async succeed(address: string, account: string): Promise<void> {
    const pair = `pair\n${account}\n${address}`
    const acct = `acct\n${account}`
    await Promise.all([
      this.store.remove([failures(pair), failures(acct), lock(pair), lock(acct)]),
      this.store.put(known(account, address), 1, KNOWN_MS),
    ])
  }
}

/**
 * The client's address as the throttle keys it: `clientIp` (core/request.ts, the one rule audit
 * and rate limits use too), `unknown` when the socket has none.
 */
export function clientAddress(
  request: Request,
  server: Parameters<typeof clientIp>[1],
  trustForwardedFor: boolean,
): string {
  return clientIp(request, server, trustForwardedFor) ?? 'unknown'
}

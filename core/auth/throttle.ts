import { TooManyRequests } from '../http'
import type { Logger } from '../log'

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

interface Entry {
  failures: number
  last: number
  lockedUntil: number
}

/** Failures older than this are forgotten, lock or no lock. */
const WINDOW_MS = 15 * 60_000
/** An address that logged into an account is remembered for it this long. */
const KNOWN_MS = 30 * 24 * 3600_000
const MAX_ENTRIES = 100_000
const MAX_KNOWN_PER_ACCOUNT = 20

/**
 * Login abuse control, in memory per process (a restart forgets it). Three counters, each with an
 * exponential backoff once past its threshold (1 s, 2 s, 4 s ... up to its cap):
 * - the account from one address: a guesser at one address is held back for up to `max_lock_s`;
 * - the address over every account (spraying one password across many accounts, refresh-token
 *   guessing): up to `max_lock_s`;
 * - the account from anywhere (a guesser spread over many addresses): at most
 *   `account_max_lock_s`, and never for an address that logged into that account before.
 * While locked, attempts are refused with 429 and Retry-After without checking the password, so
 * a lock cannot be used to test guesses and waiting it out is the only way on.
 */
export class LoginThrottle {
  /** The clock; tests move it. */
  now: () => number = Date.now
  private entries = new Map<string, Entry>()
  private known = new Map<string, Map<string, number>>()
  private lastSweep = 0

  constructor(
    private settings: ThrottleSettings,
    private log: Logger,
  ) {}

  /** Throws 429 when `address` (and, for a login, the account) is locked. */
  check(address: string, account?: string): void {
    const now = this.now()
    const waits = [this.wait(`addr\n${address}`, now)]
    if (account !== undefined) {
      waits.push(this.wait(`pair\n${account}\n${address}`, now))
      if (!this.isKnown(account, address, now)) waits.push(this.wait(`acct\n${account}`, now))
    }
    const ms = Math.max(...waits)
    if (ms <= 0) return
    const seconds = Math.ceil(ms / 1000)
    throw new TooManyRequests(`too many failed attempts; retry in ${seconds} s`, seconds, 'too_many_attempts')
  }

  /** Counts a failed attempt and logs it, and the lock it starts when it starts one. */
  fail(address: string, what: string, account?: string): void {
    const now = this.now()
    if (now - this.lastSweep > 60_000) this.sweep(now)
    const s = this.settings
    const bumps: Array<[string, string, number, number]> = [
      ['address', `addr\n${address}`, s.address_failures, s.max_lock_s],
    ]
    if (account !== undefined) {
      bumps.push(['account from address', `pair\n${account}\n${address}`, s.account_failures, s.max_lock_s])
      bumps.push(['account', `acct\n${account}`, s.account_failures, s.account_max_lock_s])
    }
    let failures = 0
    for (const [scope, key, threshold, capS] of bumps) {
      const e = this.bump(key, now)
      if (scope !== 'address') failures = Math.max(failures, e.failures)
      if (e.failures < threshold) continue
      const lockS = Math.min(capS, 2 ** Math.min(30, e.failures - threshold))
      e.lockedUntil = now + lockS * 1000
      this.log.warn('login locked out', { scope, account, address, failures: e.failures, lock_s: lockS })
    }
    this.log.warn(`${what} failed`, {
      account,
      address,
      failures: account === undefined ? undefined : failures,
    })
  }

  /** A successful login: the account's counters restart and the address is known to it. */
  succeed(address: string, account: string): void {
    this.entries.delete(`pair\n${account}\n${address}`)
    this.entries.delete(`acct\n${account}`)
    let addrs = this.known.get(account)
    if (!addrs) {
      addrs = new Map()
      this.known.set(account, addrs)
    }
    addrs.delete(address)
    addrs.set(address, this.now() + KNOWN_MS)
    if (addrs.size > MAX_KNOWN_PER_ACCOUNT) addrs.delete(addrs.keys().next().value as string)
  }

  private isKnown(account: string, address: string, now: number): boolean {
    const until = this.known.get(account)?.get(address)
    return until !== undefined && until > now
  }

  private wait(key: string, now: number): number {
    const e = this.entries.get(key)
    return e ? e.lockedUntil - now : 0
  }

  private bump(key: string, now: number): Entry {
    let e = this.entries.get(key)
    if (e && now - e.last > WINDOW_MS && e.lockedUntil <= now) e = undefined
    if (!e) e = { failures: 0, last: now, lockedUntil: 0 }
    // Re-inserted so the map's order is least recently failed first, which the size cap trims.
    this.entries.delete(key)
    this.entries.set(key, e)
    e.failures++
    e.last = now
    if (this.entries.size > MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value as string)
    return e
  }

  private sweep(now: number) {
    this.lastSweep = now
    for (const [k, e] of this.entries)
      if (now - e.last > WINDOW_MS && e.lockedUntil <= now) this.entries.delete(k)
    for (const [account, addrs] of this.known) {
      for (const [a, until] of addrs) if (until <= now) addrs.delete(a)
      if (!addrs.size) this.known.delete(account)
    }
  }
}

/** The client's address: the socket peer, or behind a trusted proxy the entry the proxy added. */
export function clientAddress(
  request: Request,
  server: { requestIP(r: Request): { address: string } | null } | null | undefined,
  trustForwardedFor: boolean,
): string {
  if (trustForwardedFor) {
    const last = request.headers.get('x-forwarded-for')?.split(',').pop()?.trim()
    if (last) return last
  }
  return server?.requestIP(request)?.address ?? 'unknown'
}

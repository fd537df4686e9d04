import { randomBytes } from 'node:crypto'
import type { ChangeDetail, Changes } from '../changes'
import { type Db, newId } from '../db'
import { sha256Hex } from '../digest'
import { Generation } from '../generation'
import { Unauthorized } from '../http'
import type { Logger } from '../log'
import type { AccessTokens } from './access'
import type { LoginThrottle } from './throttle'
import type { StoredUser, UserStore } from './users'

export interface Tokens {
  token: string
  refreshToken: string
  expiresIn: number
  user: { id: string; email: string; name: string; roles: string[] }
}

/** The change-notice topic of withdrawn trust: `{user}`, `{family}` or `{keys}`. */
const TOPIC = 'auth'
/**
 * How often each instance reads what changed in the store, in case a notice was lost (a
 * connection down while it was sent): the longest a lost notice leaves a withdrawn token working.
 */
export const SYNC_MS = 5000
/** Each read looks this far back: covers clocks apart between instances and slow commits. */
const OVERLAP_MS = 60_000
const DAY_MS = 24 * 3600 * 1000
/** Refresh tokens deleted per statement of a purge. */
const PURGE_BATCH = 1000

/** Counts a refresh of the user's token in its rate-limit budget; throws 429 past it. */
export type Charge = (userId: string) => void | Promise<void>

/** What a rotation came to: the new tokens, or the refusal (`family`: the login to withdraw). */
type Rotated = { tokens: Tokens } | { error: string; family?: string }

/**
 * When a login began: its family id is a UUIDv7 (`newId`), whose first 48 bits are the epoch ms
 * it was made. Undefined for an id of another shape (none is made so).
 */
export function loginStart(family: string): number | undefined {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-7/i.test(family)) return undefined
  return Number.parseInt(family.slice(0, 8) + family.slice(9, 13), 16)
}

/**
 * Logins (each one a family of rotating refresh tokens) and the propagation of withdrawn trust.
 *
 * A change of trust is applied to this instance's `AccessTokens` before the request that made it
 * is answered, then announced on the change-notice bus (`ctx.changes`), whose listeners on the
 * other instances read the user back from the store. A periodic read of what changed since is
 * the safety net for a notice lost on the way.
 */
export class Sessions {
  private changes?: Changes
  private timer?: Timer
  private lastSync = Date.now()
  private keysRevokedAt = 0
  /**
   * Trust this instance withdrew itself (`withdrawUser`). A read of users' trust under way
   * meanwhile may be older than that change (on PostgreSQL the read waits on the network while
   * the request runs), and applying it would hand back what was just withdrawn (a user disabled
   * here accepted here again until the next sync): such a read is read again (`settled`).
   */
  private readonly withdrawals = new Generation()

  constructor(
    private db: Db,
    private users: UserStore,
    readonly access: AccessTokens,
    private refreshTtlS: number,
    private throttle: LoginThrottle,
    private log: Logger,
    /** Drops the caches of verified keys (SDK keys, server keys, application tokens). */
    private forgetKeys: () => void,
  ) {}

  /** Loads what the store withdrew, then follows notices and the periodic read. */
  async start(changes?: Changes): Promise<void> {
    this.lastSync = Date.now()
    for (const u of await this.users.withdrawn()) this.access.setUser(u.id, Number(u.token_gen), !u.disabled)
    await this.readFamilies(this.lastSync - this.access.ttlS * 1000 - OVERLAP_MS)
    this.keysRevokedAt = await this.lastKeyRevocation()
    if (!changes) return
    this.changes = changes
    changes.on(TOPIC, (d, origin) => (origin === 'remote' ? this.heard(d) : undefined))
    this.timer = setInterval(() => {
      this.sync().catch((e) => this.log.warn('auth sync failed', { error: String(e) }))
    }, SYNC_MS)
    this.timer.unref?.()
  }

  stop(): void {
    clearInterval(this.timer)
    this.timer = undefined
  }

  /**
   * When a login ends, whatever its renewals: `refresh_ttl_s` after it began. Rotating refresh
   * tokens and renewing access tokens (`/api/v1/auth/refresh`) once went on for ever, so a stolen
   * token renewed every few minutes outlived every lifetime (security audit 2, L6).
   */
  loginEnds(family: string): number {
    return (loginStart(family) ?? Date.now()) + this.refreshTtlS * 1000
  }

  /** Spec 1 login answer: an access token and the first refresh token of a new family. */
  issue(user: StoredUser, familyId = newId()): Promise<Tokens> {
    return this.issueIn(this.db, user, familyId, Date.now())
  }

  /**
   * Inserts a new refresh token of `familyId` in `db` (a refresh's transaction) under the user's
   * token generation as read, so a password change committed since refuses it at its refresh.
   */
  private async issueIn(db: Db, user: StoredUser, familyId: string, now: number): Promise<Tokens> {
    const refreshToken = randomBytes(32).toString('base64url')
    await db.run(
      'INSERT INTO refresh_tokens (id, family_id, user_id, token_hash, expires_at, created_at, token_gen) VALUES (?, ?, ?, ?, ?, ?, ?)',
      [
        newId(),
        familyId,
        user.id,
        sha256Hex(refreshToken),
        Math.min(now + this.refreshTtlS * 1000, this.loginEnds(familyId)),
        now,
        user.tokenGen,
      ],
    )
    return {
      token: this.access.sign(user, user.tokenGen, familyId),
      refreshToken,
      expiresIn: this.access.ttlS,
      user: { id: user.id, email: user.email, name: user.name, roles: user.roles },
    }
  }

  /**
   * Rotates a refresh token: each is good once. Presenting a used one means it leaked, so the
   * whole family (every token descended from that login, access tokens included) is revoked.
   * `charge`: counts the rotation in its user's rate-limit budget, before anything is claimed
   * (a 429 leaves the token good for a later try).
   *
   * One transaction under the lock on the user's row reads and claims the token and inserts its
   * successor: a sign-out, a password change or a disable (which take that lock too) either
   * committed first, and the token is refused here, or waits until the successor exists and
   * revokes it. Claimed in a transaction of its own, with the successor inserted after it
   * committed, a token being rotated during a sign-out or a password reset survived them on
   * PostgreSQL (audit 19 H1).
   */
  async refresh(refreshToken: string, address = 'unknown', charge?: Charge): Promise<Tokens> {
    await this.throttle.check(address)
    const hash = sha256Hex(refreshToken)
    const known = await this.db.get<{ user_id: string }>(
      'SELECT user_id FROM refresh_tokens WHERE token_hash = ?',
      [hash],
    )
    if (known) await charge?.(known.user_id)
    const now = Date.now()
    const outcome: Rotated = known
      ? await this.db.tx((tx) => this.rotate(tx, hash, known.user_id, now))
      : { error: 'invalid refresh token' }
    if ('error' in outcome) {
      if (outcome.family) await this.withdrawFamily(outcome.family, now)
      await this.throttle.fail(address, 'token refresh')
      throw new Unauthorized(outcome.error, 'invalid_refresh_token')
    }
    return outcome.tokens
  }

  private async rotate(tx: Db, hash: string, userId: string, now: number): Promise<Rotated> {
    const user = await this.users.lock(tx, userId)
    const row = await tx.get<{
      id: string
      family_id: string
      expires_at: number | string
      used_at: number | null
      revoked_at: number | null
      token_gen: number | string
    }>(
      'SELECT id, family_id, expires_at, used_at, revoked_at, token_gen FROM refresh_tokens WHERE token_hash = ?',
      [hash],
    )
    if (!row) return { error: 'invalid refresh token' }
    const family = row.family_id
    if (row.used_at !== null || row.revoked_at !== null) {
      await tx.run('UPDATE refresh_tokens SET revoked_at = ? WHERE family_id = ? AND revoked_at IS NULL', [
        now,
        family,
      ])
      return {
        error:
          row.used_at !== null
            ? 'refresh token reused; its session was revoked'
            : 'this login was signed out (or its tokens revoked): sign in again',
        family,
      }
    }
    if (Number(row.expires_at) <= now) return { error: 'refresh token expired' }
    // Also for a token issued before logins had an end (its expiry then slid with each rotation).
    if (this.loginEnds(family) <= now)
      return { error: 'the login reached its lifetime (auth.refresh_ttl_s): sign in again' }
    if (!user || user.disabled) return { error: 'user no longer exists or is disabled' }
    // Issued before a password or role change (a login whose password check preceded it).
    if (Number(row.token_gen) !== user.tokenGen)
      return { error: "the user's password or roles changed since this login: sign in again" }
    const revoked = await tx.get(
      'SELECT id FROM refresh_tokens WHERE family_id = ? AND revoked_at IS NOT NULL LIMIT 1',
      [family],
    )
    if (revoked) return { error: 'this login was signed out', family }
    const claimed = await tx.run(
      'UPDATE refresh_tokens SET used_at = ? WHERE id = ? AND used_at IS NULL AND revoked_at IS NULL',
      [now, row.id],
    )
    if (!claimed) return { error: 'invalid refresh token' }
    return { tokens: await this.issueIn(tx, user, family, now) }
  }

  /** A user's trust changed in the store (password, roles, disabled, deleted): applies and tells everyone. */
  async withdrawUser(id: string, gen: number, active: boolean): Promise<void> {
    this.withdrawals.bump()
    this.access.setUser(id, gen, active)
    await this.changes?.publish(TOPIC, { user: id })
  }

  /**
   * Signing out: revokes the login family's refresh tokens in the store (where other instances
   * and restarts read it) and withdraws its access tokens everywhere. Under the lock on the
   * user's row a refresh holds from its claim to its successor's insert (`rotate`): a token
   * rotated meanwhile is revoked here. A login without a live refresh token (a spec 2 login,
   * which hands none out) is recorded revoked by a row of its own that no token matches.
   */
  async endFamily(family: string, userId: string): Promise<void> {
    const now = Date.now()
    await this.db.tx(async (tx) => {
      await this.users.lock(tx, userId)
      const ended = await tx.run(
        'UPDATE refresh_tokens SET revoked_at = ? WHERE family_id = ? AND used_at IS NULL AND revoked_at IS NULL',
        [now, family],
      )
      if (!ended)
        await tx.run(
          'INSERT INTO refresh_tokens (id, family_id, user_id, token_hash, expires_at, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
          [
            newId(),
            family,
            userId,
            sha256Hex(randomBytes(32).toString('base64url')),
            this.loginEnds(family),
            now,
            now,
          ],
        )
    })
    await this.withdrawFamily(family, now)
  }

  /**
   * Deletes refresh tokens nobody can use any more (none was ever deleted, audit 19 L2): past
   * their expiry (a login's tokens all expire when it ends), or revoked longer ago than any
   * instance reads revocations back (`start`, `sync`), a day at least. In batches, so SQLite's
   * one writer is not held for long. Runs on the core schedule (`auth.refresh-token-purge`).
   */
  async purge(signal?: AbortSignal, now = Date.now()): Promise<number> {
    const keep = Math.max(DAY_MS, 2 * (this.access.ttlS * 1000 + OVERLAP_MS))
    let deleted = 0
    for (;;) {
      const n = await this.db.run(
        `DELETE FROM refresh_tokens WHERE id IN (SELECT id FROM refresh_tokens WHERE expires_at <= ? OR revoked_at <= ? LIMIT ${PURGE_BATCH})`,
        [now, now - keep],
      )
      deleted += n
      if (n < PURGE_BATCH || signal?.aborted) break
    }
    if (deleted) this.log.info('refresh tokens purged', { deleted })
    return deleted
  }

  async withdrawFamily(family: string, at = Date.now()): Promise<void> {
    this.access.revokeFamily(family, at)
    await this.changes?.publish(TOPIC, { family })
  }

  /** A key or token was revoked: every instance forgets what it had verified. */
  async keysRevoked(): Promise<void> {
    this.forgetKeys()
    await this.changes?.publish(TOPIC, { keys: 1 })
  }

  /** Another instance's notice: read the user back from the store, or apply the family. */
  private async heard(d: ChangeDetail): Promise<void> {
    if (typeof d.user === 'string') {
      const id = d.user
      const read = await this.withdrawals.settled(() => this.users.maybe(id))
      // Unsettled: this instance kept changing trust meanwhile; the next sync reads the user again.
      if (read.settled)
        this.access.setUser(id, read.value?.tokenGen ?? 0, !!read.value && !read.value.disabled)
    }
    if (typeof d.family === 'string') this.access.revokeFamily(d.family)
    if (d.keys) this.forgetKeys()
  }

  /** The safety net: applies what the store changed lately, whether or not a notice told of it. */
  async sync(): Promise<void> {
    const started = Date.now()
    const since = this.lastSync - OVERLAP_MS
    const withdrawn = await this.withdrawals.settled(() => this.users.withdrawn(since))
    for (const u of withdrawn.settled ? withdrawn.value : [])
      this.access.setUser(u.id, Number(u.token_gen), !u.disabled)
    await this.readFamilies(since)
    const keys = await this.lastKeyRevocation()
    if (keys > this.keysRevokedAt) {
      this.keysRevokedAt = keys
      this.forgetKeys()
    }
    this.access.prune(started)
    // An unsettled read of the users is read again, from as far back, by the next sync.
    if (withdrawn.settled) this.lastSync = started
  }

  private async readFamilies(since: number): Promise<void> {
    const rows = await this.db.all<{ family_id: string; at: number | string }>(
      'SELECT family_id, MAX(revoked_at) AS at FROM refresh_tokens WHERE revoked_at > ? GROUP BY family_id',
      [since],
    )
    for (const r of rows) this.access.revokeFamily(r.family_id, Number(r.at))
  }

  private async lastKeyRevocation(): Promise<number> {
    const r = await this.db.get<{ sdk: number | string | null; scoped: number | string | null }>(
      'SELECT (SELECT MAX(revoked_at) FROM api_keys) AS sdk, (SELECT MAX(revoked_at) FROM auth_app_tokens) AS scoped',
    )
    return Math.max(Number(r?.sdk ?? 0), Number(r?.scoped ?? 0))
  }
}

import { randomBytes } from 'node:crypto'
import { type Claims, signJwt, verifyJwt } from './jwt'
import type { Principal } from './principal'

/** What an access token is minted for. */
export interface AccessSubject {
  id: string
  username: string
  email: string
  roles: string[]
}

/**
 * Access tokens: minted, verified, and refused as soon as trust in them is withdrawn.
 *
 * A token carries `typ: 'access'` (so nothing else signed with the secret passes for one), its
 * user's token generation `gen` and its login family `fam`. What this instance knows of the
 * store is held in memory, so verifying stays a map lookup on the hot path:
 * - users whose generation moved past 0 (a password or role change, a disable bumps it): a token
 *   of an older generation is refused;
 * - blocked users (disabled or deleted);
 * - login families revoked in the last access-token lifetime (a refresh token was reused): no
 *   token of theirs can be younger, so older entries are dropped.
 * Every change drops the cached verifications it concerns at once; `core/auth/sessions.ts`
 * keeps this state in step with the store and the other instances.
 */
export class AccessTokens {
  private cache = new Map<string, { principal: Principal; exp: number }>()
  private gens = new Map<string, number>()
  private blocked = new Set<string>()
  private families = new Map<string, number>()

  constructor(
    private secret: string,
    readonly ttlS: number,
  ) {}

  /** The generation a new token of `userId` gets: the newest this instance knows. */
  genOf(userId: string): number {
    return this.gens.get(userId) ?? 0
  }

  sign(user: AccessSubject, gen = this.genOf(user.id), family?: string): string {
    const now = Math.floor(Date.now() / 1000)
    const claims: Claims = {
      typ: 'access',
      sub: user.id,
      username: user.username,
      email: user.email,
      roles: user.roles,
      gen,
      iat: now,
      exp: now + this.ttlS,
      jti: randomBytes(6).toString('base64url'),
    }
    if (family) claims.fam = family
    return signJwt(claims, this.secret)
  }

  /** The principal behind an access token, or undefined when missing, invalid, expired or withdrawn. */
  verify(token: string | undefined): Principal | undefined {
    if (!token) return undefined
    const now = Date.now()
    const cached = this.cache.get(token)
    if (cached) {
      if (cached.exp > now) return cached.principal
      this.cache.delete(token)
      return undefined
    }
    const claims = verifyJwt(token, this.secret, now)
    if (!claims || claims.typ !== 'access') return undefined
    const family = typeof claims.fam === 'string' ? claims.fam : undefined
    const gen = typeof claims.gen === 'number' ? claims.gen : 0
    if (this.blocked.has(claims.sub) || gen < this.genOf(claims.sub)) return undefined
    if (family && this.families.has(family)) return undefined
    const principal: Principal = {
      kind: 'user',
      id: claims.sub,
      username: String(claims.username ?? ''),
      roles: Array.isArray(claims.roles) ? (claims.roles as string[]) : [],
      family,
      gen,
    }
    if (this.cache.size > 50_000) this.cache.clear()
    this.cache.set(token, { principal, exp: claims.exp * 1000 })
    return principal
  }

  /**
   * A user's trust as the store has it: its token generation, and whether it may act at all
   * (false: disabled or deleted). Tokens it no longer covers stop at once.
   */
  setUser(id: string, gen: number, active: boolean): void {
    const changed = gen !== this.genOf(id) || active === this.blocked.has(id)
    if (gen > 0) this.gens.set(id, gen)
    else this.gens.delete(id)
    if (active) this.blocked.delete(id)
    else this.blocked.add(id)
    if (changed) for (const [t, v] of this.cache) if (v.principal.id === id) this.cache.delete(t)
  }

  /** Ends every access token of a login family. */
  revokeFamily(family: string, at = Date.now()): void {
    if (this.families.has(family)) return
    this.families.set(family, at)
    for (const [t, v] of this.cache) if (v.principal.family === family) this.cache.delete(t)
  }

  /**
   * Forgets revoked families older than a token's lifetime: none of their tokens is still valid.
   * A minute more covers a token another instance minted before it heard of the revocation.
   */
  prune(now = Date.now()): void {
    const horizon = now - this.ttlS * 1000 - 60_000
    for (const [f, at] of this.families) if (at < horizon) this.families.delete(f)
  }
}

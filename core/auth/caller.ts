import { type Db, fromJson } from '../db'
import { Unauthorized } from '../http'
import type { Principal } from './principal'

/**
 * Re-checks, inside the transaction of a write that grants or removes trust (a user created or
 * changed, a key or token made), that the caller is still trusted as when its request was
 * authenticated: the user exists, is not disabled, its token generation is the token's (a
 * disable, a role or a password change bumps it) and it still holds every role the token named.
 *
 * Why in the write's transaction: the guard checks the token when the request arrives, and the
 * write commits later (an Argon2 hash runs in between, hundreds of milliseconds). A disable or
 * demote committed meanwhile must refuse the write, on every engine (audit sec2 M1). The caller's
 * row is locked (PostgreSQL, MySQL; SQLite runs one write transaction at a time), so a concurrent
 * disable either commits first, and this write is refused, or waits for this write to commit,
 * made while the caller was trusted.
 *
 * `also`: another user row the write changes, locked in the same statement in id order, so two
 * users changing each other at once cannot deadlock.
 *
 * Throws 401, as an expired token is answered. The admin token (no user) and the server itself
 * (`actor` undefined) have no row to check.
 */
export async function confirmCaller(tx: Db, actor: Principal | undefined, also?: string): Promise<void> {
  if (actor?.kind !== 'user') return
  const ids = also && also !== actor.id ? [actor.id, also] : [actor.id]
  const rows = await tx.all<{ id: string; roles: string; disabled: number; token_gen: number | string }>(
    `SELECT id, roles, disabled, token_gen FROM users WHERE id IN (${ids.map(() => '?').join(', ')}) ORDER BY id${
      tx.dialect === 'sqlite' ? '' : ' FOR UPDATE'
    }`,
    ids,
  )
  const row = rows.find((r) => r.id === actor.id)
  const roles = row ? fromJson<string[]>(row.roles, []) : []
  if (
    !row ||
    row.disabled ||
    Number(row.token_gen) !== (actor.gen ?? 0) ||
    !actor.roles.every((r) => roles.includes(r))
  )
    throw new Unauthorized('missing, invalid or expired token')
}

import type { Db } from '../db'
import { rowsByKeys } from '../db/keyed'
import { SCOPED_KINDS, type ScopedKind } from './app-tokens'

/**
 * Which of `callers` no longer name a credential that can send anything: a deleted user, or a
 * revoked application token or server key. Callers are named as notifications name them
 * (`<principal kind>:<id>`, `notify`'s `caller`); the admin token, the platform's own events and
 * anonymous callers never go, nor does a disabled user (an admin may enable it again).
 *
 * The rules plugin hands what such a credential opened or armed to the next credential that
 * resolves its alert: the incident of a rotated trigger token was otherwise open for good, since
 * only its opener may resolve it (plugins/rules/incidents.ts).
 */
export async function goneCredentials(db: Db, callers: readonly string[]): Promise<Set<string>> {
  const users: string[] = []
  const scoped = new Map<ScopedKind, string[]>()
  for (const c of new Set(callers)) {
    const at = c.indexOf(':')
    const [kind, id] = [c.slice(0, at), c.slice(at + 1)]
    if (at <= 0 || !id) continue
    if (kind === 'user') users.push(id)
    else if (kind === 'appToken' || kind === 'serverKey') scoped.set(kind, [...(scoped.get(kind) ?? []), id])
  }
  const gone = new Set<string>()
  if (users.length) {
    const held = await rowsByKeys<{ id: string }>(db, {
      table: 'users',
      cols: ['id'],
      scope: [],
      key: 'id',
      keys: users,
    })
    const ids = new Set(held.map((r) => r.id))
    for (const id of users) if (!ids.has(id)) gone.add(`user:${id}`)
  }
  for (const [kind, ids] of scoped) {
    const live = await rowsByKeys<{ id: string; revoked_at: number | null }>(db, {
      table: 'auth_app_tokens',
      cols: ['id', 'revoked_at'],
      scope: [['kind', SCOPED_KINDS[kind].stored]],
      key: 'id',
      keys: ids,
    })
    const held = new Set(live.filter((r) => r.revoked_at === null).map((r) => r.id))
    for (const id of ids) if (!held.has(id)) gone.add(`${kind}:${id}`)
  }
  return gone
}

import { type Db, fromJson, iso, newId } from '../db'
import { lockUntilCommit } from '../db/migrate'
import { KEY_COLUMN_MAX } from '../event-bounds'
import { Conflict, NotFound, invalidField } from '../http'
import { confirmCaller } from './caller'
import type { Principal } from './principal'
import { ROLES } from './roles'

export interface User {
  id: string
  email: string
  username: string
  name: string
  roles: string[]
  disabled: boolean
  createdAt: string
  updatedAt: string
}

/** A user as stored: with what only the server reads (the password hash, the token generation). */
export interface StoredUser extends User {
  passwordHash: string
  tokenGen: number
}

export interface NewUser {
  email: string
  username?: string
  name?: string
  password: string
  roles: string[]
}

export interface UserPatch {
  name?: string
  roles?: string[]
  password?: string
  /** The caller's own current password, when it changes its own (`UserRules`); never stored. */
  currentPassword?: string
  disabled?: boolean
}

type UserRow = {
  id: string
  email: string
  username: string
  name: string
  password_hash: string
  roles: string
  disabled: number
  token_gen: number | string
  created_at: number
  updated_at: number
}

const COLS = 'id, email, username, name, password_hash, roles, disabled, token_gen, created_at, updated_at'
/** JSON text of a role list holds `"admin"` exactly when the list does. */
const ACTIVE_ADMINS = `disabled = 0 AND roles LIKE '%"admin"%'`

export const toUser = (r: UserRow): StoredUser => ({
  id: r.id,
  email: r.email,
  username: r.username,
  name: r.name,
  roles: fromJson<string[]>(r.roles, []),
  disabled: !!r.disabled,
  createdAt: iso(r.created_at)!,
  updatedAt: iso(r.updated_at)!,
  passwordHash: r.password_hash,
  tokenGen: Number(r.token_gen),
})

/**
 * A new user's email and username as stored (the email trimmed and lowercased, the username
 * trimmed, by default the email's local part), or a 400 naming the first bad field.
 */
export function newUserFields(input: NewUser): { email: string; username: string } {
  const email = input.email.trim().toLowerCase()
  if (!/^[^@\s]+@[^@\s]+$/.test(email)) throw invalidField('body.email', 'must be an email address')
  // Lowercasing can lengthen it ('İ' becomes two characters): the stored email must fit the
  // column MySQL keeps it in, on every engine alike.
  if (email.length > KEY_COLUMN_MAX)
    throw invalidField('body.email', `at most ${KEY_COLUMN_MAX} characters once lowercased`)
  if (input.password.length < 8) throw invalidField('body.password', 'must be at least 8 characters')
  checkRoles(input.roles, 'body.roles')
  const username = (input.username ?? email.split('@')[0]).trim()
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(username))
    throw invalidField('body.username', 'letters, digits, dot, dash and underscore, 1-64')
  return { email, username }
}

/** The API's view of a user: never the hash or the generation. */
export const publicUser = (u: StoredUser): User => ({
  id: u.id,
  email: u.email,
  username: u.username,
  name: u.name,
  roles: u.roles,
  disabled: u.disabled,
  createdAt: u.createdAt,
  updatedAt: u.updatedAt,
})

export function checkRoles(roles: readonly string[], field: string): void {
  if (!roles.length) throw invalidField(field, 'at least one role is required')
  for (const r of roles)
    if (!(ROLES as readonly string[]).includes(r))
      throw invalidField(field, `unknown role '${r}', expected one of ${ROLES.join(', ')}`)
}

const sameRoles = (a: readonly string[], b: readonly string[]) =>
  a.length === b.length && a.every((r) => b.includes(r))
const isActiveAdmin = (u: User) => !u.disabled && u.roles.includes('admin')

/** What an update did to the trust placed in the user's tokens. */
export interface Updated {
  user: StoredUser
  /** The password, the roles or the disabled flag changed: its sessions were ended. */
  trustChanged: boolean
}

/** User creations take turns on engines with concurrent writers (SQLite has one writer). */
const USERNAME_LOCK = { pg: 72_410_002, mysql: 'liveops_usernames', waitS: 10 }

/**
 * The users table. Writes that could leave no active administrator (disabling, demoting or
 * deleting one) run under a lock on every active admin row, so two admins demoting each other at
 * once cannot both succeed; the last one is refused with 409.
 */
export function userStore(db: Db) {
  const row = (tx: Db, id: string) => tx.get<UserRow>(`SELECT ${COLS} FROM users WHERE id = ?`, [id])

  /** Locks the active admins (PostgreSQL, MySQL; SQLite runs one write transaction at a time). */
  const lockAdmins = async (tx: Db) => {
    if (db.dialect !== 'sqlite')
      await tx.run(`UPDATE users SET updated_at = updated_at WHERE ${ACTIVE_ADMINS}`)
  }
  const keepAnAdmin = async (tx: Db) => {
    const left = await tx.get<{ n: number | string }>(
      `SELECT COUNT(*) AS n FROM users WHERE ${ACTIVE_ADMINS}`,
    )
    if (Number(left?.n ?? 0) === 0)
      throw new Conflict(
        'the last active admin cannot be disabled, demoted or deleted; make another admin first',
      )
  }
  /**
   * Revokes the user's live refresh tokens, under the lock on its row the caller's write holds
   * (the UPDATE or DELETE of it), which a refresh takes before it claims a token and keeps until
   * the token it issues is inserted (core/auth/sessions.ts): a token rotated meanwhile is revoked
   * here or refused there. Used ones are left as they are: presented again, they revoke their
   * login as reused.
   */
  const endSessions = (tx: Db, id: string, now: number) =>
    tx.run(
      'UPDATE refresh_tokens SET revoked_at = ? WHERE user_id = ? AND used_at IS NULL AND revoked_at IS NULL',
      [now, id],
    )

  const insert = async (tx: Db, input: NewUser, hash: string, username: string, email: string) => {
    // A name that differs from a user's only by case ('Admin' beside 'admin') reads as that user
    // in audit entries, notifications and rosters: refused. Creations take turns (a lock held to
    // the transaction's end), so two at once cannot both pass the check.
    await lockUntilCommit(tx, USERNAME_LOCK)
    const same = await tx.get<{ username: string }>('SELECT username FROM users WHERE lower(username) = ?', [
      username.toLowerCase(),
    ])
    if (same)
      throw new Conflict(
        `a user with username '${same.username}' exists (usernames that differ only by case are one)`,
      )
    const now = Date.now()
    const r = await tx.get<UserRow>(
      `INSERT INTO users (id, email, username, name, password_hash, roles, disabled, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?) ON CONFLICT DO NOTHING RETURNING ${COLS}`,
      [newId(), email, username, input.name?.trim() || username, hash, JSON.stringify(input.roles), now, now],
    )
    if (!r) throw new Conflict(`a user with email '${email}' or username '${username}' exists`)
    return toUser(r)
  }

  return {
    async count(): Promise<number> {
      const r = await db.get<{ n: number }>('SELECT COUNT(*) AS n FROM users')
      return Number(r?.n ?? 0)
    },

    /** `actor`: who asks, confirmed still trusted in the insert's transaction (`confirmCaller`). */
    async create(
      input: NewUser,
      hash: string,
      username: string,
      email: string,
      actor?: Principal,
    ): Promise<StoredUser> {
      return db.tx(async (tx) => {
        if (actor?.kind === 'user') await confirmCaller(tx, actor)
        return insert(tx, input, hash, username, email)
      })
    },

    async list(page: number, size: number): Promise<{ items: User[]; total: number }> {
      const [rows, total] = await Promise.all([
        db.all<UserRow>(`SELECT ${COLS} FROM users ORDER BY created_at, id LIMIT ? OFFSET ?`, [
          size,
          page * size,
        ]),
        this.count(),
      ])
      return { items: rows.map((r) => publicUser(toUser(r))), total }
    },

    async get(id: string): Promise<StoredUser> {
      const r = await row(db, id)
      if (!r) throw new NotFound(`user '${id}' not found`)
      return toUser(r)
    },

    /**
     * The user's row in `tx`, locked to its end (PostgreSQL, MySQL; SQLite runs one write
     * transaction at a time): the lock `confirmCaller` and every change of the user take, so
     * what changes trust and what renews a token (core/auth/sessions.ts) take turns.
     */
    async lock(tx: Db, id: string): Promise<StoredUser | undefined> {
      const r = await tx.get<UserRow>(
        `SELECT ${COLS} FROM users WHERE id = ?${tx.dialect === 'sqlite' ? '' : ' FOR UPDATE'}`,
        [id],
      )
      return r && toUser(r)
    },

    /** The user, or undefined when it does not exist; a store fault throws (answered 503, never 401). */
    async maybe(id: string): Promise<StoredUser | undefined> {
      const r = await row(db, id)
      return r ? toUser(r) : undefined
    },

    async find(by: 'email' | 'username', value: string): Promise<StoredUser | undefined> {
      const r = await db.get<UserRow>(`SELECT ${COLS} FROM users WHERE ${by} = ?`, [value])
      return r && toUser(r)
    },

    /**
     * Applies a patch in one transaction. `check` sees the user as it is inside the transaction
     * and throws to refuse. A new password (`hash`), other roles or disabling bump the token
     * generation and revoke every refresh token of the user. `actor`: who asks, confirmed still
     * trusted before the write (`confirmCaller`), after the admins' lock: every write that takes
     * both takes them in that order.
     */
    async update(
      id: string,
      patch: UserPatch,
      hash: string | null,
      check: (before: StoredUser) => void,
      actor?: Principal,
    ): Promise<Updated> {
      return db.tx(async (tx) => {
        const r = await row(tx, id)
        if (!r) throw new NotFound(`user '${id}' not found`)
        const before = toUser(r)
        check(before)
        const rolesChanged = !!patch.roles && !sameRoles(patch.roles, before.roles)
        const disabling = patch.disabled === true && !before.disabled
        const trustChanged = rolesChanged || hash !== null || disabling
        const demoting = rolesChanged && !patch.roles?.includes('admin')
        const removesAdmin = isActiveAdmin(before) && (demoting || disabling)
        if (removesAdmin) await lockAdmins(tx)
        await confirmCaller(tx, actor, id)
        const now = Date.now()
        const after = await tx.get<UserRow>(
          `UPDATE users SET name = COALESCE(?, name), roles = COALESCE(?, roles), password_hash = COALESCE(?, password_hash),
           disabled = COALESCE(?, disabled), token_gen = token_gen + ?, updated_at = ? WHERE id = ? RETURNING ${COLS}`,
          [
            patch.name ?? null,
            patch.roles ? JSON.stringify(patch.roles) : null,
            hash,
            patch.disabled === undefined ? null : patch.disabled ? 1 : 0,
            trustChanged ? 1 : 0,
            now,
            id,
          ],
        )
        if (!after) throw new NotFound(`user '${id}' not found`)
        if (removesAdmin) await keepAnAdmin(tx)
        if (trustChanged) await endSessions(tx, id, now)
        return { user: toUser(after), trustChanged }
      })
    },

    /** Deletes a user and revokes its refresh tokens; `check` and `actor` as in `update`. */
    async remove(id: string, check: (before: StoredUser) => void, actor?: Principal): Promise<void> {
      await db.tx(async (tx) => {
        const r = await row(tx, id)
        if (!r) throw new NotFound(`user '${id}' not found`)
        const before = toUser(r)
        check(before)
        if (isActiveAdmin(before)) await lockAdmins(tx)
        await confirmCaller(tx, actor, id)
        // Deleted first: the DELETE locks the row (the admin token's call took no lock before).
        await tx.run('DELETE FROM users WHERE id = ?', [id])
        await endSessions(tx, id, Date.now())
        if (isActiveAdmin(before)) await keepAnAdmin(tx)
      })
    },

    /** Users whose trust differs from a fresh one's: a generation past 0, or disabled. */
    withdrawn(since?: number): Promise<Array<{ id: string; token_gen: number | string; disabled: number }>> {
      return since === undefined
        ? db.all('SELECT id, token_gen, disabled FROM users WHERE token_gen > 0 OR disabled = 1')
        : db.all('SELECT id, token_gen, disabled FROM users WHERE updated_at > ?', [since])
    },
  }
}
export type UserStore = ReturnType<typeof userStore>

import { url, type Tokens, type User, accessToken, api, drop, hold, onSession } from './api'
import { Store, useStore } from './store'

/** What `GET /api/auth/permissions` answers. */
export interface Permissions {
  roles: string[]
  permissions: string[]
  table: Record<string, { read: string[]; write: string[] }>
}

export interface Session {
  user: User
  roles: string[]
  /** `area:read` and `area:write` the signed-in user holds. */
  permissions: ReadonlySet<string>
  table: Permissions['table']
}

export const session = new Store<Session | undefined>(undefined)
/** Why the last session ended (shown on the sign-in page). */
export const signedOutReason = new Store<string | undefined>(undefined)

async function load(t: Tokens): Promise<void> {
  const p = await api.get<Permissions>('/api/auth/permissions')
  session.set({ user: t.user, roles: p.roles, permissions: new Set(p.permissions), table: p.table })
}

onSession({
  // Role changes apply at the next token: read what it grants again.
  refreshed: (t) => void load(t).catch(() => undefined),
  ended: (why) => signOut(why),
})

export async function signIn(email: string, password: string): Promise<void> {
  const t = await api.post<Tokens>('/api/auth/login', { email, password })
  hold(t)
  try {
    await load(t)
  } catch (e) {
    drop()
    throw e
  }
  signedOutReason.set(undefined)
}

/**
 * The user signs out: the server ends this login (its refresh token too, on every instance), then
 * the console forgets it. A failed call still signs out here; the tokens then expire on their own.
 */
export async function logOut(): Promise<void> {
  const token = accessToken()
  if (token)
    await fetch(url('/api/auth/logout'), {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
    }).catch(() => undefined)
  signOut('You signed out.')
}

export function signOut(reason?: string): void {
  drop()
  session.set(undefined)
  signedOutReason.set(reason)
}

/** Whether the signed-in user holds a permission (`games:write`). */
export function can(permission: string): boolean {
  return session.get()?.permissions.has(permission) ?? false
}

/** `can` for a component: re-renders when the session (and its roles) change. */
export function useCan(): (permission: string) => boolean {
  const s = useStore(session)
  return (p) => s?.permissions.has(p) ?? false
}

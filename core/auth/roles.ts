/** Spec 1 section 5 roles. */
export const ROLES = ['admin', 'operator', 'analyst', 'developer', 'viewer'] as const
export type Role = (typeof ROLES)[number]

/**
 * A permission is `<area>:read` or `<area>:write`. Plugins use their own area names; the table
 * below says which roles may write which areas. Every role may read every area except the
 * restricted ones, which need the matching write role too.
 */
export type Permission = `${string}:${'read' | 'write'}`

const WRITES: Record<Role, readonly string[] | '*'> = {
  admin: '*',
  // "game management, user management"
  operator: ['games', 'environments', 'experiments', 'ml', 'users', 'notify', 'ops'],
  // "view data, create reports"
  analyst: ['reports'],
  // "SDK management, API keys"
  developer: ['apikeys', 'sdk'],
  viewer: [],
}

/** Areas whose reads are as sensitive as their writes. */
const RESTRICTED_READS = new Set(['users', 'apikeys'])

export function allows(roles: readonly string[], permission: Permission): boolean {
  const [area, action] = permission.split(':') as [string, 'read' | 'write']
  for (const role of roles) {
    const w = WRITES[role as Role]
    if (w === undefined) continue
    if (w === '*') return true
    if (w.includes(area)) return true
    if (action === 'read' && !RESTRICTED_READS.has(area)) return true
  }
  return false
}

/** The single role shown by the spec 2 login and `/auth/me`: the most powerful one held. */
export function primaryRole(roles: readonly string[]): Role {
  return ROLES.find((r) => roles.includes(r)) ?? 'viewer'
}

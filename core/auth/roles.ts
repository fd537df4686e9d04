/** Spec 1 section 5 roles. */
export const ROLES = ['admin', 'operator', 'analyst', 'developer', 'viewer'] as const
export type Role = (typeof ROLES)[number]

/** A permission is `<area>:read` or `<area>:write`. Areas are declared by core and the plugins. */
export type Permission = `${string}:${'read' | 'write'}`

/**
 * Which roles hold an area by default. `admin` holds every area. `read` absent means every role
 * may read; list roles there for areas whose reads are as sensitive as their writes (users, keys).
 * Roles that may write may always read.
 */
export interface AreaGrant {
  write: readonly Role[]
  read?: readonly Role[]
}
export type Areas = Record<string, AreaGrant>

/** Core's own areas: its auth routes and the platform monitoring endpoint. */
export const CORE_AREAS: Areas = {
  // spec 1: operator is "game management, user management"
  users: { write: ['operator'], read: ['operator'] },
  // spec 1: developer is "SDK management, API keys"
  apikeys: { write: ['developer'], read: ['developer'] },
  ops: { write: ['operator'] },
}

/**
 * The role table: the union of every declared area, built once at start. A permission naming an
 * area nobody declared is a programming error, found when the route is defined, not at request
 * time.
 */
export class Permissions {
  private areas = new Map<string, { write: Set<string>; read?: Set<string>; owner: string }>()

  declare(owner: string, areas: Areas): void {
    for (const [area, grant] of Object.entries(areas)) {
      const prev = this.areas.get(area)
      if (prev) throw new Error(`permission area '${area}' declared by both '${prev.owner}' and '${owner}'`)
      for (const r of [...grant.write, ...(grant.read ?? [])])
        if (!(ROLES as readonly string[]).includes(r))
          throw new Error(`permission area '${area}' of '${owner}' grants unknown role '${r}'`)
      this.areas.set(area, {
        owner,
        write: new Set(grant.write),
        read: grant.read && new Set([...grant.read, ...grant.write]),
      })
    }
  }

  /** Throws when `permission` names an undeclared area or action. */
  check(permission: string): void {
    const [area, action] = permission.split(':')
    if ((action !== 'read' && action !== 'write') || !this.areas.has(area))
      throw new Error(
        `permission '${permission}' names no declared area (known: ${[...this.areas.keys()].join(', ')})`,
      )
  }

  allows(roles: readonly string[], permission: Permission): boolean {
    const [area, action] = permission.split(':') as [string, 'read' | 'write']
    const a = this.areas.get(area)
    if (!a) return roles.includes('admin')
    for (const role of roles) {
      if (role === 'admin' || a.write.has(role)) return true
      if (action === 'read' && (a.read === undefined ? ROLES.includes(role as Role) : a.read.has(role)))
        return true
    }
    return false
  }

  /** The roles, most powerful first. */
  roles(): Role[] {
    return [...ROLES]
  }

  /** Every permission `role` grants on its own. */
  grantsOf(role: string): Permission[] {
    const out: Permission[] = []
    for (const area of this.areas.keys())
      for (const action of ['read', 'write'] as const)
        if (this.allows([role], `${area}:${action}`)) out.push(`${area}:${action}`)
    return out
  }

  /** Each area with the roles holding read and write: documentation and `GET /api/auth/roles`-style reads. */
  table(): Record<string, { read: Role[]; write: Role[] }> {
    const out: Record<string, { read: Role[]; write: Role[] }> = {}
    for (const [area, a] of this.areas) {
      const write = ROLES.filter((r) => r === 'admin' || a.write.has(r))
      const read = ROLES.filter((r) => r === 'admin' || a.read === undefined || a.read.has(r))
      out[area] = { read, write }
    }
    return out
  }
}

/** The single role shown by the spec 2 login and `/auth/me`: the most powerful one held. */
export function primaryRole(roles: readonly string[]): Role {
  return ROLES.find((r) => roles.includes(r)) ?? 'viewer'
}

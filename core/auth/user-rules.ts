import { Forbidden } from '../http'
import type { Principal } from './principal'
import type { Permissions } from './roles'
import type { User, UserPatch } from './users'

/**
 * Who may do what to a user (issue 34 point 1), on top of the `users:write` permission:
 * - nobody grants a role they do not hold: a role is held when the caller's roles grant every
 *   permission that role grants (admin holds every role);
 * - only an admin creates, changes, disables or deletes an admin, or sets another user's password;
 * - nobody changes their own roles;
 * - only an admin enables a disabled user (anyone who manages users may disable one: a quick
 *   stop; giving the access back is the admin's call, or a disabled account came back through
 *   any operator);
 * - a user changes their own password only with the current one (`currentPassword`, checked by
 *   the service through the login throttle), so a stolen session cannot keep the account.
 * The last active admin (409) is kept by the store, inside the write's transaction.
 * `actor` absent: the server itself (the bootstrap admin, `liveops` commands), never refused.
 */
export class UserRules {
  constructor(private permissions: Permissions) {}

  /** Every role `roles` may grant to others. */
  grantable(roles: readonly string[]): string[] {
    return this.permissions.roles().filter((r) => this.missing(roles, r).length === 0)
  }

  /** Permissions `role` grants that `roles` do not. */
  private missing(roles: readonly string[], role: string): string[] {
    if (roles.includes('admin')) return []
    return this.permissions.grantsOf(role).filter((p) => !this.permissions.allows(roles, p))
  }

  private checkGrant(actor: Principal, roles: readonly string[], field: string): void {
    for (const role of roles) {
      const lacking = this.missing(actor.roles, role)
      if (lacking.length)
        throw new Forbidden(
          `${field}: you cannot grant the role '${role}': it grants ${lacking.join(', ')}, which your roles do not (nobody grants a role they do not hold)`,
        )
    }
  }

  private checkAdminTarget(actor: Principal, target: Pick<User, 'roles'>, what: string): void {
    if (target.roles.includes('admin') && !actor.roles.includes('admin'))
      throw new Forbidden(`only an admin may ${what} an admin`)
  }

  create(actor: Principal | undefined, roles: readonly string[]): void {
    if (!actor) return
    this.checkGrant(actor, roles, 'body.roles')
  }

  update(actor: Principal | undefined, target: User, patch: UserPatch): void {
    if (!actor) return
    this.checkAdminTarget(actor, target, patch.disabled ? 'disable' : 'change')
    const self = actor.kind === 'user' && actor.id === target.id
    if (patch.password !== undefined && !self && !actor.roles.includes('admin'))
      throw new Forbidden("only an admin may set another user's password")
    if (patch.disabled === false && target.disabled && !actor.roles.includes('admin'))
      throw new Forbidden('only an admin may enable a disabled user')
    if (!patch.roles) return
    const added = patch.roles.filter((r) => !target.roles.includes(r))
    const removed = target.roles.filter((r) => !patch.roles?.includes(r))
    if (!added.length && !removed.length) return
    if (self) throw new Forbidden('nobody changes their own roles: ask another user who manages users')
    this.checkGrant(actor, added, 'body.roles')
  }

  remove(actor: Principal | undefined, target: User): void {
    if (!actor) return
    this.checkAdminTarget(actor, target, 'delete')
  }
}

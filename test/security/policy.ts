import { readFileSync } from 'node:fs'
import { join } from 'node:path'

/*
 * What the attack suite expects, read from docs/security.md (the role table and the route
 * table) and the rules that page states in prose ("How a request is judged"). Nothing here is
 * read from the implementation under test.
 */

export const ROLES = ['admin', 'operator', 'analyst', 'developer', 'viewer'] as const
export type Role = (typeof ROLES)[number]
export const SCOPES = ['config', 'trigger', 'query'] as const
export type Scope = (typeof SCOPES)[number]

/** A credential the suite sends. `on`: the game whose resources the request names (SDK keys). */
export type Kind =
  | {
      kind: 'none' | 'forged' | 'expired' | 'refresh' | 'disabled' | 'agentToken' | 'signature' | 'adminToken'
    }
  | { kind: 'role'; role: Role }
  | { kind: 'sdkKey'; on: 'own' | 'other' }
  | { kind: 'serverKey' | 'appToken'; scope: Scope }

export type Outcome = 'reach' | 401 | 403

export interface Policy {
  /** area -> roles reading it, roles writing it */
  roles: Map<string, { read: Set<Role>; write: Set<Role> }>
  /** `METHOD /path` -> the access alternatives of its row */
  routes: Map<string, string[]>
}

const DOC = join(import.meta.dir, '../../docs/security.md')

/** The rows of the markdown table that follows `marker` in the document. */
function table(text: string, marker: string): string[][] {
  const at = text.indexOf(marker)
  if (at < 0) throw new Error(`docs/security.md has no '${marker}'`)
  const rows: string[][] = []
  for (const line of text.slice(at).split('\n').slice(1)) {
    if (!line.startsWith('|')) {
      if (rows.length) break
      continue
    }
    const cells = line
      .slice(1, -1)
      .split('|')
      .map((c) => c.trim())
    if (cells.every((c) => /^-+$/.test(c))) continue
    rows.push(cells)
  }
  return rows.slice(1)
}

const codes = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1])
const roleList = (cell: string): Set<Role> =>
  new Set(cell === 'everyone' ? ROLES : (cell.split(',').map((r) => r.trim()) as Role[]))

export function readPolicy(text = readFileSync(DOC, 'utf8')): Policy {
  const roles = new Map<string, { read: Set<Role>; write: Set<Role> }>()
  for (const [area, read, write] of table(text, '<!-- the role table'))
    roles.set(codes(area)[0], { read: roleList(read), write: roleList(write) })
  const routes = new Map<string, string[]>()
  for (const [op, access] of table(text, '<!-- the route table')) {
    const key = codes(op)[0]
    if (routes.has(key)) throw new Error(`docs/security.md lists ${key} twice`)
    routes.set(key, codes(access))
  }
  return { roles, routes }
}

const MACHINE = new Set(['signature', 'sdkKey', 'agentToken', 'chatProof'])
/** Kinds core's guard does not read as a credential: no credential at all, for rule 1. */
const NOT_A_CREDENTIAL = new Set([
  'none',
  'forged',
  'expired',
  'refresh',
  'disabled',
  'agentToken',
  'signature',
])

function admits(p: Policy, alt: string, k: Kind): boolean {
  const area = /^([\w-]+):(read|write)$/.exec(alt)
  switch (k.kind) {
    case 'role': {
      if (alt === 'anyUser' || (alt === 'admin' && k.role === 'admin')) return true
      if (!area) return false
      const grant = p.roles.get(area[1])
      if (!grant)
        throw new Error(`docs/security.md: the route table names area '${area[1]}', the role table does not`)
      return k.role === 'admin' || grant.write.has(k.role) || (area[2] === 'read' && grant.read.has(k.role))
    }
    case 'adminToken':
      return alt === 'adminToken' || alt === 'admin' || !!area
    case 'sdkKey':
      return alt === 'sdkKey' || (alt === 'sdkKey(own)' && k.on === 'own')
    case 'serverKey':
    case 'appToken':
      return alt === `scope:${k.scope}`
    case 'signature':
      return alt === 'signature'
    case 'agentToken':
      return alt === 'agentToken'
    default:
      return false
  }
}

/** What docs/security.md says `k` gets from a route whose access is `access`. */
export function expected(p: Policy, access: string[], k: Kind): Outcome {
  if (access.includes('public')) return 'reach'
  if (access.some((alt) => admits(p, alt, k))) return 'reach'
  if (NOT_A_CREDENTIAL.has(k.kind)) return 401
  if (access.every((alt) => MACHINE.has(alt)))
    return k.kind === 'serverKey' && access.includes('sdkKey') ? 403 : 401
  return 403
}

/** A readable name of a credential, for failure lists. */
export function nameOf(k: Kind): string {
  if (k.kind === 'role') return k.role
  if (k.kind === 'sdkKey') return `sdkKey(${k.on} game)`
  if (k.kind === 'serverKey' || k.kind === 'appToken') return `${k.kind}(${k.scope})`
  return k.kind
}

import type { TSchema } from '@sinclair/typebox'
import { type AnyElysia, Elysia } from 'elysia'
import { type GuardDeps, authGuard } from './auth/guard'
import type { Principal } from './auth/service'
import { clientIp } from './http'
import type { Logger } from './log'
import type { FastServer, PluginContext } from './plugin'
import { NOT_RECORDED, auditView } from './secrets'
import { routeBodies } from './strict'

/** Who made a write and from where: what an audit entry records (issue #19 point 7). */
export interface AuditCaller {
  /** Absent for callers that proved themselves another way (a chat platform's callback): name them in `actor`. */
  principal?: Principal
  request: Request
  server: FastServer | null
}

/** Who acted when no principal says it: `{kind: 'chatcard', name: <open_id>}`. */
export interface AuditActor {
  kind: string
  id?: string
  name?: string
}

/**
 * Requests whose handler recorded its own entry: core's entry derived from the route (see
 * core/app.ts, `http.write`) is then not recorded again.
 */
const recorded = new WeakSet<Request>()
export const auditedByHandler = (request: Request) => recorded.has(request)

/**
 * The one way a plugin records an audit entry of its own, with details a route alone cannot
 * give (before and after): `audit(caller, 'backups.delete', id, details)` raises `audit` on the
 * bus (the audit plugin stores it). Details arrive already masked by the caller's schema
 * (`maskSecrets`); the audit plugin masks `sensitive_fields` again. Every other write is
 * recorded from its route without a call (core/app.ts).
 */
export function auditor(ctx: Pick<PluginContext<unknown>, 'bus' | 'core'>) {
  return (
    c: AuditCaller,
    action: string,
    target: string,
    details?: Record<string, unknown>,
    actor?: AuditActor,
  ) => {
    recorded.add(c.request)
    void ctx.bus.emit('audit', {
      actor_kind: actor?.kind ?? c.principal?.kind ?? 'anonymous',
      actor_id: actor ? actor.id : c.principal?.id,
      actor_name: actor ? actor.name : c.principal?.username,
      action,
      target,
      ip: clientIp(c.request, c.server, ctx.core.server.trust_forwarded_for),
      ok: true,
      details: details && bounded(details),
    })
  }
}

/**
 * A handler's details as recorded: past MAX_DETAILS characters of JSON, each part of them that is
 * large keeps its field names (the first 50) or its length. Entries are kept for a year and read
 * 500 at a time: an operator's 9 MB rate-limit sets had made one entry 9 MB (its before and after),
 * and one read of the log 277 MB.
 */
function bounded(details: Record<string, unknown>): Record<string, unknown> {
  if (JSON.stringify(details).length <= MAX_DETAILS) return details
  const part = (v: unknown): unknown => {
    const n = JSON.stringify(v ?? null).length
    if (n <= MAX_DETAILS / 8) return v
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      const keys = Object.keys(v)
      return { fields: keys.slice(0, 50), ...(keys.length > 50 ? { more: keys.length - 50 } : {}) }
    }
    return `(${Array.isArray(v) ? `${v.length} items, ` : ''}${n} characters)`
  }
  return Object.fromEntries(Object.entries(details).map(([k, v]) => [k, part(v)]))
}

/**
 * What a route's write records, when its route alone does not say it well (core derives the rest
 * from the route template: `PUT /api/v1/rules/:id` is `rule.update` on `rule:<id>`):
 * - a string: the action (`channel.enable`), the target still derived;
 * - `{action, target}`: `target` is a template over the path parameters (`channel:{name}`);
 * - `false`: not a write worth an entry (a read sent as POST, data-plane traffic such as
 *   predictions and heartbeats).
 */
export type AuditSpec = false | string | { action: string; target?: string }

/**
 * The `audit` route option: `{ audit: 'channel.enable' }`. It only annotates the route (shown in
 * the OpenAPI description as `x-audit`); core reads it when the write is answered.
 */
export const auditMacro = new Elysia({ name: 'liveops.audit-macro' }).macro({
  // An OpenAPI extension: the document shows what each write records.
  audit: (spec: AuditSpec) => ({ detail: { 'x-audit': spec } as Record<string, unknown> }),
})

/** The route options every plugin's routes take (`ctx.guard`): the auth macros and `audit`. */
export const routeGuard = (d: GuardDeps) =>
  new Elysia({ name: 'liveops.route-guard' }).use(authGuard(d)).use(auditMacro)
export type RouteGuard = ReturnType<typeof routeGuard>

const VERBS: Record<string, string> = { POST: 'create', PUT: 'update', PATCH: 'update', DELETE: 'delete' }

/** `rules` -> `rule`, `ml-models` -> `ml_model`, `policies` -> `policy`. */
const singular = (s: string) =>
  s
    .replace(/-/g, '_')
    .replace(/ies$/, 'y')
    .replace(/([^s])s$/, '$1')

/**
 * The action and target a write names when its route does not say otherwise: the resource is the
 * collection before the last path parameter, the verb the method (POST create, PUT update,
 * DELETE delete) or the word after the parameter (`POST /api/games/:gameId/publish` is
 * `game.publish` on `game:<id>`). Nested resources name their parents: `environment.update` on
 * `game:g1/environment:prod`. A create names what it made (`created`, from the answer).
 */
export function derivedAction(
  method: string,
  template: string,
  params: Record<string, string | undefined>,
  created?: string,
): { action: string; target?: string; resource: string } {
  const segs = template.split('/').filter(Boolean)
  while (segs.length && (segs[0] === 'api' || /^v\d+$/.test(segs[0]))) segs.shift()
  const parts: string[] = []
  let resource = 'request'
  let verb: string | undefined
  segs.forEach((s, i) => {
    if (s.startsWith(':')) return
    const next = segs[i + 1]
    const last = i === segs.length - 1
    const plural = /[^s]s$/.test(s)
    if (next?.startsWith(':')) {
      resource = singular(s)
      parts.push(`${resource}:${params[next.slice(1)] ?? ''}`)
    } else if (last && i > 0 && !plural && (segs[i - 1].startsWith(':') || method === 'POST')) {
      // A word after a parameter, or posted to a collection, is what is done to it.
      const w = s.replace(/-/g, '_')
      verb = method === 'DELETE' ? `${w}_delete` : w
      if (!segs[i - 1].startsWith(':')) resource = singular(segs[i - 1])
    } else resource = singular(s)
  })
  if (method === 'POST' && (verb === undefined || verb === 'create') && created !== undefined)
    parts.push(`${resource}:${created}`)
  verb ??= VERBS[method] ?? method.toLowerCase()
  return { action: `${resource}.${verb}`, target: parts.length ? parts.join('/') : undefined, resource }
}

/** What core records of a write from its route (the `http.write` event's `audit`). */
export interface WriteAudit {
  action: string
  target?: string
  details?: Record<string, unknown>
}

/** Details past this many characters of JSON keep only the body's field names. */
const MAX_DETAILS = 4096

/**
 * The id a create answered with: `{id}`, the envelope's `{data: {id}}`, a notification id; the
 * name when the collection's items are addressed by name (`/environments/:environmentName`).
 */
function createdId(response: unknown, byName: boolean): string | undefined {
  if (!response || typeof response !== 'object') return undefined
  const r = response as Record<string, unknown>
  const data = (r.data && typeof r.data === 'object' ? r.data : {}) as Record<string, unknown>
  const id = byName ? (data.name ?? r.name) : (data.id ?? r.id ?? data.notification_id)
  return typeof id === 'string' || typeof id === 'number' ? String(id) : undefined
}

/** A target derived for `resource`, named for the action's own resource (`notify:1` -> `notification:1`). */
function renamed(target: string | undefined, from: string, action: string): string | undefined {
  const to = action.split('.')[0]
  if (!target || from === to) return target
  const parts = target.split('/')
  const last = parts.length - 1
  if (parts[last].startsWith(`${from}:`)) parts[last] = `${to}:${parts[last].slice(from.length + 1)}`
  return parts.join('/')
}

const fill = (template: string, params: Record<string, string | undefined>) =>
  template.replace(/\{(\w+)\}/g, (_, k: string) => params[k] ?? '')

type RouteInfo = { spec?: AuditSpec; body?: TSchema; operator: boolean; byName: boolean }

/**
 * Every write of every plugin is audited without a call in its handler (issue 34 point 9): for a
 * write answered on an operator route (Bearer, admin token or application token), this derives
 * what the entry says: the action and target from the route (`audit` option, else the template),
 * and the request body as its schema declares it, secrets masked (`auditView`). Undefined when the
 * route says `audit: false`, serves the SDK (an API key or a signature: data, not configuration),
 * or its handler recorded an entry of its own (`auditor`).
 */
export function writeAuditor(app: () => AnyElysia, log: Logger) {
  let table: Map<string, RouteInfo> | undefined
  const build = () => {
    const a = app()
    const bodies = routeBodies(a)
    const out = new Map<string, RouteInfo>()
    const routes = a.routes as unknown as Array<{
      method: string
      path: string
      hooks: Record<string, unknown>
    }>
    // How each collection's items are addressed: `/games/:gameId/environments/:environmentName`.
    const itemParam = new Map<string, string>()
    for (const r of routes) {
      const m = /^(.*)\/:(\w+)$/.exec(r.path)
      if (m) itemParam.set(m[1], m[2])
    }
    for (const r of routes) {
      const key = `${r.method} ${r.path}`
      const item = itemParam.get(r.path) ?? ''
      const detail = (r.hooks.detail ?? {}) as {
        security?: Array<Record<string, unknown>>
        'x-audit'?: AuditSpec
      }
      out.set(key, {
        spec: detail['x-audit'],
        body: bodies.get(key),
        operator: (detail.security ?? []).some((s) => 'bearer' in s || 'appToken' in s),
        byName: item === 'name' || item.endsWith('Name'),
      })
    }
    return out
  }
  const derive = (
    request: Request,
    route: string,
    params: Record<string, string | undefined>,
    body: unknown,
    response: unknown,
  ): WriteAudit | undefined => {
    if (auditedByHandler(request)) return undefined
    table ??= build()
    const r = table.get(`${request.method} ${route}`)
    if (!r || r.spec === false || !r.operator) return undefined
    const derived = derivedAction(request.method, route, params, createdId(response, r.byName))
    const spec = r.spec
    const named =
      typeof spec === 'string'
        ? { action: spec, target: renamed(derived.target, derived.resource, spec) }
        : spec
          ? { action: spec.action, target: spec.target ? fill(spec.target, params) : derived.target }
          : { action: derived.action, target: derived.target }
    if (!r.body || body === undefined || body === null) return named
    const shown = auditView(r.body, body)
    const small = JSON.stringify(shown).length <= MAX_DETAILS
    return {
      ...named,
      details: {
        body: small
          ? shown
          : shown && typeof shown === 'object'
            ? { fields: Object.keys(shown) }
            : NOT_RECORDED,
      },
    }
  }
  // Asked after the answer went out: a fault here is logged, never thrown into the request.
  return (...args: Parameters<typeof derive>): WriteAudit | undefined => {
    try {
      return derive(...args)
    } catch (e) {
      log.error('audit entry not derived', { route: args[1], error: String(e) })
      return undefined
    }
  }
}

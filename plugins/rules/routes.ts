import { Elysia, t } from 'elysia'
import { auditor } from '../../core/audit'
import { newId } from '../../core/db'
import { NotFound, ServiceUnavailable, invalidField, ok } from '../../core/http'
import type { PluginContext } from '../../core/plugin'
import { rejectUnknown } from '../../core/strict'
import { alertKey } from './alert-id'
import type { AlertStore } from './alerts'
import type { chatcard } from './chatcard'
import { chatcardRoute } from './chatcard-route'
import {
  INCIDENT_STATUSES,
  type IncidentStatus,
  type IncidentStore,
  TIMELINE_DEFAULT,
  TIMELINE_MAX,
} from './incidents'
import { compileRule, normalize } from './rule'
import type { RulesRuntime } from './runtime'
import { AckBody, GroupBody, IncidentsQuery, RuleBody, type RulesConfig } from './schema'
import type { RuleRecord, RulesStore } from './store'

const tags = (tag: string, summary: string, description?: string) => ({
  tags: [`notify ${tag}`],
  summary,
  ...(description ? { description } : {}),
})
const Id = t.Object({ id: t.String() })

export interface RulesRouteDeps {
  ctx: PluginContext<RulesConfig>
  store: RulesStore
  runtime: RulesRuntime
  alerts?: AlertStore
  incidents?: IncidentStore
  callback: ReturnType<typeof chatcard>
}

/** The ack body is optional (spec 2: `{acked_by: optional string}`), so it is checked here rather than by a schema. */
function ackedBy(body: unknown): string | undefined {
  if (body === undefined || body === null || body === '') return undefined
  if (typeof body !== 'object' || Array.isArray(body)) throw invalidField('body', 'must be an object')
  rejectUnknown(AckBody, body, 'body')
  const v = (body as { acked_by?: unknown }).acked_by
  if (v !== undefined && (typeof v !== 'string' || v.length > 200))
    throw invalidField('body.acked_by', 'must be a string of at most 200 characters')
  return v
}

export function rulesRoutes(d: RulesRouteDeps) {
  const { ctx, store, runtime } = d
  const audit = auditor(ctx)
  const cfg = ctx.config
  const engine = () => {
    if (!cfg.engine) throw new ServiceUnavailable('rule engine is not configured')
    return runtime.engine
  }
  const groupsOn = () => {
    if (!cfg.groups) throw new ServiceUnavailable('group manager is not configured')
  }
  const acks = () => {
    if (!d.alerts) throw new ServiceUnavailable('acknowledgement store is not configured')
    return d.alerts
  }
  const incidents = () => {
    if (!d.incidents) throw new ServiceUnavailable('incident store is not configured')
    return d.incidents
  }
  const view = (r: RuleRecord) => ({
    ...r.rule,
    shadow_hits: runtime.engine.shadowHits(r.rule.id),
    created_at: new Date(r.created_at).toISOString(),
    updated_at: new Date(r.updated_at).toISOString(),
  })
  const one = async (id: string) => {
    const r = await store.getRule(id)
    if (!r) throw new NotFound(`rule '${id}' not found`)
    return r
  }

  return new Elysia({ name: 'rules' })
    .use(ctx.guard)
    .get(
      '/api/v1/rules',
      async () => {
        engine()
        const rules = (await store.listRules()).map(view)
        return ok({ rules, count: rules.length })
      },
      {
        appScope: { scope: 'query', permission: 'rules:read' },
        detail: tags('rules', 'Every rule with its shadow_hits, in write order; 503 when the engine is off'),
      },
    )
    .post(
      '/api/v1/rules',
      async ({ body }) => {
        engine()
        const rule = normalize(body, body.id ?? newId())
        const compiled = compileRule(rule)
        const rec = await store.createRule(rule)
        runtime.put(rec, compiled)
        return ok(view(rec), 'rule created')
      },
      {
        appScope: { scope: 'config', permission: 'rules:write' },
        transform: ({ body }) => rejectUnknown(RuleBody, body, 'body'),
        body: RuleBody,
        detail: tags(
          'rules',
          'Create a rule: compiled when saved (400 with the position of an illegal expression), 409 for a taken id',
          'mode defaults to shadow, action to route, priority to 0; the id is generated when omitted. ' +
            'Match language: type, level, title, body, params.<name>; == != < <= > >= in, not in, && || !, strings, numbers, true, false, null, [lists], parentheses; ' +
            '2048 characters, 256 nodes at most. Ordering level against a level name compares severity. ' +
            'route steps [{match?, channels}] (channels may be group:<id>) only with action route; the first step that holds routes, none: the static routes. ' +
            'for (<= 24h), group_by (1-8 params) with group_interval (5m), inhibit {source, equal, ttl (30m)}, escalation {ack_timeout (5m), to}.',
        ),
      },
    )
    .get(
      '/api/v1/rules/:id',
      async ({ params }) => {
        engine()
        const r = await one(params.id)
        return ok({ ...view(r), shadow_stats: runtime.engine.shadowStats(r.rule.id) })
      },
      {
        appScope: { scope: 'query', permission: 'rules:read' },
        params: Id,
        detail: tags(
          'rules',
          'One rule with shadow_hits and shadow_stats {total, last_24h, last_7d, samples?, held, evaluation_errors}',
          'Statistics live in this process and reset on restart; held counts shadow matches that would have been suppressed, silenced or inhibited.',
        ),
      },
    )
    .put(
      '/api/v1/rules/:id',
      async ({ params, body }) => {
        engine()
        const rule = normalize(body, params.id)
        const compiled = compileRule(rule)
        const rec = await store.updateRule(rule)
        runtime.put(rec, compiled)
        return ok(view(rec), 'rule updated')
      },
      {
        appScope: { scope: 'config', permission: 'rules:write' },
        params: Id,
        transform: ({ body }) => rejectUnknown(RuleBody, body, 'body'),
        body: RuleBody,
        detail: tags(
          'rules',
          'Replace a rule (the URL id wins); effective at once; 404 when unknown',
          'Fields left out take their defaults (mode shadow, action route): this is a whole-rule write. Shadow statistics are kept.',
        ),
      },
    )
    .delete(
      '/api/v1/rules/:id',
      async ({ params }) => {
        engine()
        runtime.remove(params.id, await store.deleteRule(params.id))
        return ok({ id: params.id }, 'rule deleted')
      },
      {
        appScope: { scope: 'config', permission: 'rules:write' },
        params: Id,
        detail: tags('rules', 'Delete a rule; 404 when unknown'),
      },
    )
    .get(
      '/api/v1/groups',
      async () => {
        groupsOn()
        const groups = await store.listGroups()
        return ok({ groups, count: groups.length })
      },
      {
        appScope: { scope: 'query', permission: 'rules:read' },
        detail: tags('groups', 'Every group; 503 when the group manager is off'),
      },
    )
    .post(
      '/api/v1/groups',
      async ({ body }) => {
        groupsOn()
        const { rev, ...g } = await store.createGroup({ ...body, id: body.id ?? newId() })
        runtime.putGroup({ ...g, rev })
        return ok(g, 'group created')
      },
      {
        appScope: { scope: 'config', permission: 'rules:write' },
        transform: ({ body }) => rejectUnknown(GroupBody, body, 'body'),
        body: GroupBody,
        detail: tags(
          'groups',
          'Create a group {id?, description?, members: [{channel, recipients?}]}; 409 for a taken id',
          'A member without recipients means every recipient of that channel. Notifications reach a group as group:<id> in channels, audience or a rule route.',
        ),
      },
    )
    .get(
      '/api/v1/groups/:id',
      async ({ params }) => {
        groupsOn()
        return ok(await store.getGroup(params.id))
      },
      {
        appScope: { scope: 'query', permission: 'rules:read' },
        params: Id,
        detail: tags('groups', 'One group; 404 when unknown'),
      },
    )
    .put(
      '/api/v1/groups/:id',
      async ({ params, body }) => {
        groupsOn()
        const { rev, ...g } = await store.updateGroup({ ...body, id: params.id })
        runtime.putGroup({ ...g, rev })
        return ok(g, 'group updated')
      },
      {
        appScope: { scope: 'config', permission: 'rules:write' },
        params: Id,
        transform: ({ body }) => rejectUnknown(GroupBody, body, 'body'),
        body: GroupBody,
        detail: tags('groups', 'Replace a group (the URL id wins); effective at once; 404 when unknown'),
      },
    )
    .delete(
      '/api/v1/groups/:id',
      async ({ params }) => {
        groupsOn()
        runtime.removeGroup(params.id, await store.deleteGroup(params.id))
        return ok({ id: params.id }, 'group deleted')
      },
      {
        appScope: { scope: 'config', permission: 'rules:write' },
        params: Id,
        detail: tags('groups', 'Delete a group; rules naming it stay and fail explicitly at dispatch'),
      },
    )
    .get('/api/v1/alerts/:id', async ({ params }) => ok(await acks().get(params.id)), {
      appScope: { scope: 'query', permission: 'alerts:read' },
      params: Id,
      detail: tags(
        'alerts',
        'Acknowledgement state {alert_id, acknowledged, ack?}; 503 without the ack store. An alert id of more than 191 characters is kept, and answered, as `#` and its SHA-256 (hex); the long id and that form both reach it.',
      ),
    })
    .post(
      '/api/v1/alerts/:id/ack',
      async ({ params, body, principal }) => {
        const store = acks()
        const by = ackedBy(body) ?? principal?.username ?? ''
        // As the card callback: acknowledging an alert never raised would stop `arm()` from ever
        // arming its escalation, so a guessed id (e.g. `ops-alerts:<rule>`) could be silenced in advance.
        if (!(await store.exists(params.id))) throw new NotFound(`alert '${alertKey(params.id)}' not found`)
        return ok(await store.ack(params.id, by, 'api'), 'alert acknowledged')
      },
      {
        appScope: { scope: 'trigger', permission: 'alerts:write' },
        params: Id,
        detail: tags(
          'alerts',
          'Acknowledge an alert id: the first acknowledgement wins and repeats return it; cancels every pending escalation and acks every open incident of the id, whichever credential opened or armed them',
          "acked_by defaults to the caller's user name. 404 when no incident or escalation names the alert: an alert never raised cannot be acknowledged ahead of time to silence its escalation.",
        ),
      },
    )
    .get(
      '/api/v1/incidents',
      async ({ query }) => {
        const store = incidents()
        const status = query.status === undefined || query.status === 'all' ? undefined : query.status
        if (status !== undefined && !INCIDENT_STATUSES.includes(status as IncidentStatus))
          throw invalidField('query.status', `must be one of open, acked, resolved, all; got '${status}'`)
        let limit = 100
        if (query.limit !== undefined) {
          limit = Number(query.limit)
          if (!/^\d+$/.test(query.limit) || limit < 1 || limit > 1000)
            throw invalidField('query.limit', `must be an integer from 1 to 1000, got '${query.limit}'`)
        }
        const list = await store.list({
          status: status as IncidentStatus | undefined,
          rule_id: query.rule_id,
          alert_id: query.alert_id,
          limit,
        })
        return ok({ incidents: list, count: list.length })
      },
      {
        appScope: { scope: 'query', permission: 'incidents:read' },
        query: IncidentsQuery,
        detail: tags(
          'incidents',
          'Incidents newest first; status (open, acked, resolved, all) filters by the derived status; limit 1-1000 (100)',
        ),
      },
    )
    .get(
      '/api/v1/incidents/stats',
      async ({ query }) => {
        let since = Date.now() - 30 * 86_400_000
        if (query.since !== undefined) {
          since = Date.parse(query.since)
          if (Number.isNaN(since)) throw invalidField('query.since', 'must be an RFC 3339 timestamp')
        }
        return ok(await incidents().stats(since))
      },
      {
        appScope: { scope: 'query', permission: 'incidents:read' },
        query: t.Object({ since: t.Optional(t.String()) }),
        detail: tags(
          'incidents',
          'MTTA and MTTR {count, mean_s, median_s} and counts by derived status, over incidents opened since `since` (default 30 days)',
        ),
      },
    )
    .get(
      '/api/v1/incidents/:id',
      async ({ params, query }) => {
        let limit = TIMELINE_DEFAULT
        if (query.limit !== undefined) {
          limit = Number(query.limit)
          if (!/^\d+$/.test(query.limit) || limit < 1 || limit > TIMELINE_MAX)
            throw invalidField(
              'query.limit',
              `must be an integer from 1 to ${TIMELINE_MAX}, got '${query.limit}'`,
            )
        }
        return ok(await incidents().get(params.id, limit))
      },
      {
        appScope: { scope: 'query', permission: 'incidents:read' },
        params: Id,
        query: t.Object({ limit: t.Optional(t.String()) }),
        detail: tags(
          'incidents',
          `One incident with its newest timeline entries [{at, kind, detail}], oldest first: limit 1-${TIMELINE_MAX} (${TIMELINE_DEFAULT}); timeline_total counts them all. 400 naming query.limit; 404 when unknown`,
          'An incident resolves (params.status resolved, or its rule no longer matching the alert) only by a notification of the credential that opened it; ' +
            "another credential's notification is accepted but resolves nothing: the timeline gets {kind: resolve_refused, detail: {reason, caller (the credential's kind), refused}} and the escalation stays armed.",
        ),
      },
    )
    .use(chatcardRoute(d, audit))
}

import { Elysia, t } from 'elysia'
import { auditor } from '../../core/audit'
import { ok } from '../../core/http'
import { definePlugin } from '../../core/plugin'
import { SingleFlight } from '../../core/single-flight'
import { rejectUnknown } from '../../core/strict'
import type { Agent, EffectiveLimit } from '../agents/schema'
import { GatewayLimiter } from './limiter'
import { type RuleIndex, agentFingerprint, effectiveLimits, indexRules } from './limits'
import m001 from './migrations/001_rate_limits.sql' with { type: 'text' }
import { MAX_PREVIEW_AGENTS, MAX_RULE_AGENTS, preview } from './preview'
import { PreviewBody, RateLimitSet, StoredSet } from './schema'
import { checkRules, rateLimitStore } from './store'

const tag = (summary: string, description?: string, responses?: Record<string, { description: string }>) => ({
  tags: ['rate-limits'],
  summary,
  description,
  ...(responses ? { responses } : {}),
})
const Params = t.Object({ id: t.String() })

/**
 * Rate-limit rule sets (spec 3): stored whole after validating every field, previewed against
 * the registered agents, and enforced by the execution side, never by the HTTP middleware: each
 * agent's heartbeat answer (and GET /api/v1/agents/{id}/limits) carries the rules that bind it
 * (`effectiveLimits`, registered into the agents service). And
 * the gateway limiter the auth guard counts requests against: a token bucket
 * (`rateLimit.requestsPerMinute`, `rateLimit.burstSize`) shared by every instance through Redis
 * when `redis.url` (or core's `redis.url`, REDIS_URL) is set.
 */
export default definePlugin({
  name: 'rate-limits',
  dependsOn: ['agents'],
  config: t.Object(
    {
      rateLimit: t.Object(
        {
          /** Tokens per minute per user or API key; absent: core's rate_limit.requests_per_minute. 0 disables. */
          requestsPerMinute: t.Optional(t.Integer({ minimum: 0 })),
          /** Bucket capacity; absent: core's rate_limit.burst. */
          burstSize: t.Optional(t.Integer({ minimum: 0 })),
        },
        { additionalProperties: false, default: {} },
      ),
      redis: t.Object(
        {
          /** Shares the bucket among instances; absent: core's redis.url (REDIS_URL), else the database; '' keeps it per instance. */
          url: t.Optional(t.String()),
          prefix: t.String({ default: 'liveops:rl:' }),
          /**
           * A window this long in which Redis answered nothing while requests waited is a timeout;
           * `down_after_timeouts` in a row are an outage (the local bucket until Redis answers). A
           * slow answer is waited for: a slow Redis under a burst is not an outage.
           */
          timeout_ms: t.Integer({ minimum: 1, default: 100 }),
          down_after_timeouts: t.Integer({ minimum: 1, default: 3 }),
          /** After a Redis failure, requests use the local bucket this long before Redis is tried again. */
          retry_ms: t.Integer({ minimum: 0, default: 1000 }),
        },
        { additionalProperties: false, default: {} },
      ),
    },
    { additionalProperties: false, default: {} },
  ),
  migrations: [{ id: 1, name: 'rate_limits', sql: m001 }],
  permissions: { rate_limits: { write: ['operator'] } },
  setup(ctx) {
    const store = rateLimitStore(ctx.db)
    const agents = ctx.service('agents')
    // Every agent's heartbeat asks (20 at once had parsed 9 MB sets 20 times over): the sets are
    // read once a second at most, indexed by what can bind them, and each agent's limits kept
    // while its name, labels and functions stay the same. A change made here is read at the next
    // heartbeat; another instance's within the second.
    type Snapshot = {
      at: number
      ready: Promise<{
        index: RuleIndex
        limits: Map<string, { fp: bigint | number; limits: EffectiveLimit[] }>
      }>
    }
    let sets: Snapshot | undefined
    const current = () => {
      if (!sets || Date.now() - sets.at >= 1_000) {
        const read: Snapshot = {
          at: Date.now(),
          ready: store.list().then((list) => ({ index: indexRules(list), limits: new Map() })),
        }
        // A failed read is not kept: the next heartbeat reads again.
        read.ready.catch(() => {
          if (sets === read) sets = undefined
        })
        sets = read
      }
      return sets.ready
    }
    agents.limitsFrom(async (agent) => {
      const { index, limits } = await current()
      const fp = agentFingerprint(agent)
      const kept = limits.get(agent.agent_id)
      if (kept?.fp === fp) return kept.limits
      const l = effectiveLimits(index, agent)
      limits.set(agent.agent_id, { fp, limits: l })
      return l
    })
    // Previews under way at once share one read of the agents.
    const reading = new SingleFlight<Agent[]>()
    const registered = () => reading.run(() => agents.list())
    const url = ctx.config.redis.url ?? ctx.core.redis.url
    const limiter = new GatewayLimiter(
      {
        requestsPerMinute: ctx.config.rateLimit.requestsPerMinute ?? ctx.core.rate_limit.requests_per_minute,
        burstSize: ctx.config.rateLimit.burstSize ?? ctx.core.rate_limit.burst,
      },
      ctx.log,
      url
        ? {
            url,
            prefix: ctx.config.redis.prefix,
            timeoutMs: ctx.config.redis.timeout_ms,
            downAfter: ctx.config.redis.down_after_timeouts,
            retryMs: ctx.config.redis.retry_ms,
          }
        : undefined,
      // Without Redis the instances of one PostgreSQL or MySQL share the bucket through it, unless
      // told '' (local). A SQLite file serves one instance: its bucket stays in memory, where a
      // request costs no write through SQLite's single writer.
      !url && ctx.config.redis.url === undefined && ctx.db.dialect !== 'sqlite'
        ? { take: (key, s) => ctx.shared.take(key, s), prefix: ctx.config.redis.prefix }
        : undefined,
    )
    ctx.rateLimiter.use(limiter)
    ctx.onStop(() => limiter.close())
    if (url)
      // Not critical: while Redis is away every instance still limits on its own.
      ctx.health(
        'rate_limit_redis',
        async () => {
          const c = await limiter.check()
          return c.ok ? { status: 'up', mode: 'shared' } : { status: 'down', mode: 'local', error: c.error }
        },
        { critical: false },
      )

    const audit = auditor(ctx)

    return new Elysia({ name: 'rate-limits' })
      .use(ctx.guard)
      .model({ 'rateLimits.Set': StoredSet })
      .put(
        '/api/v1/rate-limits',
        async ({ body, set, principal, request, server }) => {
          const r = await store.put(body)
          sets = undefined
          set.status = r.before ? 200 : 201
          audit({ principal, request, server }, 'rate_limits.put', r.set.rateLimitId, {
            before: r.before ?? null,
            after: r.set,
          })
          return ok(r.set)
        },
        {
          permission: 'rate_limits:write',
          // The handler records rate_limits.put (and .delete); a refused attempt reads the same.
          audit: 'rate_limits.put',
          transform: ({ body }) => rejectUnknown(RateLimitSet, body, 'body'),
          body: RateLimitSet,
          detail: tag(
            'Store a whole rule set',
            '201 when new, 200 when it replaced the set with that rateLimitId. Every field is checked (400 naming it): resource function|api|user, action reject|throttle, limit and window positive integers, rules with scope function|service, key, limitQps > 0, match over game_id/env/region/zone, percent 1-100; one rule per scope, key and match. status on|off, on when absent. The HTTP middleware does not apply stored sets (spec 3: the gateway limiter is rateLimit.requestsPerMinute and burstSize); agents enforce them: every heartbeat answer, and GET /api/v1/agents/{id}/limits, carries the rules of the sets that are on and bind that agent (labels match, key names it or a function it serves, and its stable rollout bucket, SHA-256 of rateLimitId:agent_id mod 100, is below percent). A change reaches each agent at its next heartbeat.',
            { '200': { description: 'Replaced' }, '201': { description: 'Created' } },
          ),
        },
      )
      .get('/api/v1/rate-limits', async () => ok(await store.list()), {
        permission: 'rate_limits:read',
        detail: tag('List rule sets'),
      })
      .get('/api/v1/rate-limits/:id', async ({ params }) => ok(await store.get(params.id)), {
        permission: 'rate_limits:read',
        params: Params,
        detail: tag('Read one rule set'),
      })
      .delete(
        '/api/v1/rate-limits/:id',
        async ({ params, principal, request, server }) => {
          const before = await store.remove(params.id)
          sets = undefined
          audit({ principal, request, server }, 'rate_limits.delete', params.id, { before })
          return ok(null, 'deleted')
        },
        {
          permission: 'rate_limits:write',
          audit: { action: 'rate_limits.delete', target: '{id}' },
          params: Params,
          detail: tag('Delete a rule set'),
        },
      )
      .post(
        '/api/v1/rate-limits/preview',
        async ({ body }) => {
          checkRules(body)
          return ok(preview(body, await registered()))
        },
        {
          permission: 'rate_limits:write',
          // A preview changes nothing.
          audit: false,
          transform: ({ body }) => rejectUnknown(PreviewBody, body, 'body'),
          body: PreviewBody,
          detail: tag(
            'Preview a rule set against the registered agents',
            `The body is a rule set as for PUT (rateLimitId optional); nothing is stored. Needs rate_limits:write: previewing is a step of editing. Answers {matched, agents: [{agent_id, game_id, env, region, zone, qps, qps_1m, status}], rules: [{index, scope, key, effective_qps, matched, agents, current_qps, rollout_matched, rollout}]}; agents holds at most ${MAX_PREVIEW_AGENTS} agents and each rule's agents and rollout at most ${MAX_RULE_AGENTS} ids (the first by agent_id); matched, rollout_matched and current_qps cover them all. A service rule binds the agents whose labels equal its match and whose agent_id or name is its key (* for all); a function rule binds matching agents serving that function; effective_qps = limitQps x percent / 100. With a rateLimitId, rollout lists the bound agents inside the rule's percent (stable bucket of rateLimitId:agent_id below it): those whose heartbeat will carry the rule once the set is stored and on.`,
          ),
        },
      )
  },
})

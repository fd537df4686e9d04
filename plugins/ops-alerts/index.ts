import { Elysia, t } from 'elysia'
import { auditor } from '../../core/audit'
import { invalidField, ok } from '../../core/http'
import { definePlugin } from '../../core/plugin'
import { rejectUnknown } from '../../core/strict'
import { Evaluator, MAX_FIRED, MAX_FIRED_PER_EVALUATION } from './evaluate'
import m001 from './migrations/001_ops_alerts.sql' with { type: 'text' }
import m002 from './migrations/002_fired_label.sql' with { type: 'text' }
import { RuleCreate, RuleUpdate } from './schema'
import { DEFAULT_COOLDOWN_S, alertStore } from './store'

const tag = (summary: string, description?: string, responses?: Record<string, { description: string }>) => ({
  tags: ['ops-alerts'],
  summary,
  description,
  ...(responses ? { responses } : {}),
})
const Params = t.Object({ id: t.String() })

/** Ops alert rules on the svc_ metrics (issue #19 point 5), raising `alert.fired` on the bus. */
export default definePlugin({
  name: 'ops-alerts',
  config: t.Object(
    {
      /**
       * Seconds between evaluations; 0 evaluates only on POST /api/v1/ops/alerts/evaluate. Also a
       * rule's least cooldownSeconds (400 below it; a stored one below it counts as it).
       */
      eval_interval_s: t.Integer({ minimum: 0, default: 30 }),
    },
    { additionalProperties: false, default: {} },
  ),
  migrations: [
    { id: 1, name: 'ops_alerts', sql: m001 },
    { id: 2, name: 'fired_label', sql: m002 },
  ],
  permissions: { ops_alerts: { write: ['operator'] } },
  setup(ctx) {
    // The least cooldown is the interval: one alert per series an evaluation (0: evaluations
    // only on request, each bounded by the caps and run one at a time).
    const floorS = () => ctx.config.eval_interval_s
    const store = alertStore(ctx.db, { defaultCooldownS: () => Math.max(DEFAULT_COOLDOWN_S, floorS()) })
    const heldBack = ctx.metrics.counter(
      'svc_ops_alerts_held_back_total',
      `Series whose rule held but which an evaluation did not raise: past ${MAX_FIRED} a rule or ${MAX_FIRED_PER_EVALUATION} an evaluation`,
    )
    const evaluator = new Evaluator(store, ctx.metrics, ctx.bus, {
      floorS,
      heldBack: (n) => heldBack.inc(n),
      log: ctx.log,
    })
    /** A cooldown below the interval is refused, naming the field. */
    const checkCooldown = (b: { cooldownSeconds?: number }) => {
      if (b.cooldownSeconds !== undefined && b.cooldownSeconds < floorS())
        throw invalidField(
          'body.cooldownSeconds',
          `at least ${floorS()} (plugins.ops-alerts.eval_interval_s): a series alerts at most once an evaluation`,
        )
    }
    // Every instance evaluates its own metrics (its request rates, its queue): the consecutive
    // counts are its own, and the shared cooldown claim lets one instance fire a series at a time.
    if (ctx.config.eval_interval_s > 0)
      ctx.schedule(
        'ops-alerts.evaluate',
        ctx.config.eval_interval_s * 1000,
        async () => {
          await evaluator.run()
        },
        { perInstance: true },
      )

    const audit = auditor(ctx)

    return new Elysia({ name: 'ops-alerts' })
      .use(ctx.guard)
      .post(
        '/api/v1/ops/alerts',
        async ({ body, set, principal, request, server }) => {
          checkCooldown(body)
          const r = await store.create(body)
          set.status = 201
          audit({ principal, request, server }, 'ops_alerts.create', r.id, { after: r })
          return ok(r)
        },
        {
          permission: 'ops_alerts:write',
          // The handler records ops_alerts.*; a refused attempt reads the same.
          audit: 'ops_alerts.create',
          transform: ({ body }) => rejectUnknown(RuleCreate, body, 'body'),
          body: RuleCreate,
          detail: tag(
            'Create an alert rule on a svc_ metric',
            '{name, metric, labels?, operator gt|gte|lt|lte, threshold, forCount (1), cooldownSeconds (300, at least eval_interval_s: 400 below it), level info|warning|error|critical, enabled (true)}. The rule fires alert.fired with alert_id ops-alerts:<id>[:<labels>] when a series meets the condition forCount evaluations in a row, then not again for that series within cooldownSeconds. A metric with no series yet is skipped.',
            { '201': { description: 'Created' } },
          ),
        },
      )
      .get('/api/v1/ops/alerts', async () => ok(await store.list()), {
        permission: 'ops_alerts:read',
        detail: tag('List alert rules'),
      })
      .post('/api/v1/ops/alerts/evaluate', async () => ok(await evaluator.run()), {
        permission: 'ops_alerts:write',
        detail: tag(
          'Evaluate every rule now',
          `Counts as one evaluation (forCount); answers {fired, held_back}: the series that fired, and how many met their rule but were held back (at most ${MAX_FIRED} a rule and ${MAX_FIRED_PER_EVALUATION} an evaluation; a later evaluation raises them). While an evaluation runs (scheduled or requested), a request shares it and answers its result.`,
        ),
      })
      .get(
        '/api/v1/ops/alerts/:id',
        async ({ params }) =>
          ok({ ...(await store.get(params.id)), fired: await store.lastFired(params.id) }),
        {
          permission: 'ops_alerts:read',
          params: Params,
          detail: tag('Read a rule with when each series last fired'),
        },
      )
      .put(
        '/api/v1/ops/alerts/:id',
        async ({ params, body, principal, request, server }) => {
          checkCooldown(body)
          const r = await store.update(params.id, body)
          audit({ principal, request, server }, 'ops_alerts.update', params.id, { ...r })
          return ok(r.after)
        },
        {
          permission: 'ops_alerts:write',
          audit: { action: 'ops_alerts.update', target: '{id}' },
          params: Params,
          transform: ({ body }) => rejectUnknown(RuleUpdate, body, 'body'),
          body: RuleUpdate,
          detail: tag('Update a rule: only the fields named change'),
        },
      )
      .delete(
        '/api/v1/ops/alerts/:id',
        async ({ params, principal, request, server }) => {
          const before = await store.remove(params.id)
          audit({ principal, request, server }, 'ops_alerts.delete', params.id, { before })
          return ok(null, 'deleted')
        },
        {
          permission: 'ops_alerts:write',
          audit: { action: 'ops_alerts.delete', target: '{id}' },
          params: Params,
          detail: tag('Delete a rule'),
        },
      )
  },
})

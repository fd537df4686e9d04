import { Elysia, t } from 'elysia'
import { auditor } from '../../core/audit'
import { ok } from '../../core/http'
import { definePlugin } from '../../core/plugin'
import { rejectUnknown } from '../../core/strict'
import { Evaluator } from './evaluate'
import m001 from './migrations/001_ops_alerts.sql' with { type: 'text' }
import m002 from './migrations/002_fired_label.sql' with { type: 'text' }
import { RuleCreate, RuleUpdate } from './schema'
import { alertStore } from './store'

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
      /** Seconds between evaluations; 0 evaluates only on POST /api/v1/ops/alerts/evaluate. */
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
    const store = alertStore(ctx.db)
    const evaluator = new Evaluator(store, ctx.metrics, ctx.bus)
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
            '{name, metric, labels?, operator gt|gte|lt|lte, threshold, forCount (1), cooldownSeconds (300), level info|warning|error|critical, enabled (true)}. The rule fires alert.fired with alert_id ops-alerts:<id>[:<labels>] when a series meets the condition forCount evaluations in a row, then not again for that series within cooldownSeconds. A metric with no series yet is skipped.',
            { '201': { description: 'Created' } },
          ),
        },
      )
      .get('/api/v1/ops/alerts', async () => ok(await store.list()), {
        permission: 'ops_alerts:read',
        detail: tag('List alert rules'),
      })
      .post('/api/v1/ops/alerts/evaluate', async () => ok({ fired: await evaluator.run() }), {
        permission: 'ops_alerts:write',
        detail: tag(
          'Evaluate every rule now',
          'Counts as one evaluation (forCount); answers the series that fired.',
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

import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp, until } from '../helpers'
import { AGENT_TOKEN } from './lib'

/*
 * A refused write of a known caller is recorded under the action its handler records when the
 * write succeeds: `GET /api/v1/audit?action=backups.create` lists a viewer's refused backup
 * beside the admin's, not as `backup.create`. Reported by the security audit: site.set vs
 * site.update, backups.create vs backup.create, and a viewer's refused agent delete left no entry.
 */

interface Entry {
  actor: { kind: string; id?: string; name?: string }
  action: string
  target?: string
  ok: boolean
  details?: Record<string, unknown>
}

interface Case {
  what: string
  method: string
  path: string
  body?: unknown
  /** The action the handler records on success. */
  action: string
  /** The target of both entries, when the route's path names it. */
  target?: string
}

const CASES: Case[] = [
  {
    what: 'a backup',
    method: 'POST',
    path: '/api/v1/backups',
    body: { name: 'names' },
    action: 'backups.create',
  },
  {
    what: 'a site setting',
    method: 'PUT',
    path: '/api/v1/site/notification.smtpHost',
    body: { value: 'smtp.names.example' },
    action: 'site.set',
    target: 'notification.smtpHost',
  },
  {
    what: 'a certificate alert rule',
    method: 'POST',
    path: '/api/v1/certificates/alerts',
    body: { domain: 'names.example', thresholdDays: 20 },
    action: 'certificates.alert_create',
  },
  {
    what: 'a rate-limit set',
    method: 'PUT',
    path: '/api/v1/rate-limits',
    body: {
      rateLimitId: 'rl-names',
      name: 'Names',
      resource: 'api',
      limit: 60,
      window: 60,
      action: 'reject',
      rules: [],
    },
    action: 'rate_limits.put',
  },
  {
    what: 'an ops alert rule',
    method: 'POST',
    path: '/api/v1/ops/alerts',
    body: { name: 'Names', metric: 'svc_db_up', operator: 'lt', threshold: 1, level: 'warning' },
    action: 'ops_alerts.create',
  },
  {
    what: 'the ops notification routing',
    method: 'PUT',
    path: '/api/v1/ops/notifications',
    body: { channels: [], rules: [] },
    action: 'ops_notifications.put',
    target: 'routing',
  },
  {
    what: 'an agent delete',
    method: 'DELETE',
    path: '/api/v1/agents/names-agent',
    action: 'agents.delete',
    target: 'names-agent',
  },
]

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let viewer: string
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        audit: {},
        games: {},
        ingest: { purge_interval_minutes: 0 },
        notify: {},
        site: {},
        certificates: { check_interval_s: 0 },
        backups: { schedule_interval_s: 0 },
        'rate-limits': {},
        'ops-alerts': { eval_interval_s: 0 },
        agents: { token: AGENT_TOKEN },
      },
    })
    admin = await a.token('admin')
    viewer = await a.token('viewer')
    const reg = await a.req('POST', '/api/v1/agents', {
      headers: { 'x-agent-token': AGENT_TOKEN },
      body: {
        agent_id: 'names-agent',
        game_id: 'g-names',
        env: 'prod',
        region: 'eu',
        zone: 'eu-a',
        functions: [],
      },
    })
    expect(reg.status).toBe(201)
  })
  afterAll(async () => {
    // The backup runs in the background: the store is left once it finished.
    await until(
      async () => {
        const r = await a.req('GET', '/api/v1/backups', { token: admin })
        return r.body.data.items.every((b: { status: string }) => !['pending', 'running'].includes(b.status))
      },
      { ms: 15_000, what: 'the backup finished' },
    )
    await a.stop()
  })

  /** The entries of `action` once both the accepted and the refused one arrived. */
  const both = (action: string) =>
    until(
      async () => {
        const r = await a.req('GET', `/api/v1/audit?size=500&action=${action}`, { token: admin })
        const items = r.body.data.items as Entry[]
        const done = items.find((e) => e.ok && e.actor.name === 'admin-user')
        const refused = items.find((e) => !e.ok && e.actor.name === 'viewer-user')
        return done && refused ? { done, refused, items } : undefined
      },
      { ms: 5_000, what: `both entries of ${action}` },
    )

  describe('a refused write is recorded under the action of the accepted one', () => {
    for (const c of CASES)
      test(`${c.what}: ${c.action}`, async () => {
        const refused = await a.req(c.method, c.path, { token: viewer, body: c.body })
        expect(refused.status, JSON.stringify(refused.body)).toBe(403)
        const done = await a.req(c.method, c.path, { token: admin, body: c.body })
        expect(done.status, JSON.stringify(done.body)).toBeLessThan(300)

        const e = await both(c.action)
        expect(e.refused).toMatchObject({ action: c.action, ok: false, details: { status: 403 } })
        expect(e.done).toMatchObject({ action: c.action, ok: true })
        expect(e.refused.actor).toMatchObject({ kind: 'user', name: 'viewer-user' })
        if (c.target) {
          expect(e.done.target).toBe(c.target)
          expect(e.refused.target).toBe(c.target)
        }
        // One entry each: the handler's entry is not doubled by core's derived one.
        expect(e.items.filter((x) => x.ok)).toHaveLength(1)
        expect(e.items.filter((x) => !x.ok)).toHaveLength(1)
      })
  })

  test("the area filter finds the refused attempts with the accepted ones (no 'backup.create')", async () => {
    const r = await a.req('GET', '/api/v1/audit?size=500', { token: admin })
    const actions = new Set((r.body.data.items as Entry[]).map((e) => e.action))
    for (const derived of [
      'backup.create',
      'site.update',
      'alert.create',
      'rate_limit.update',
      'agent.delete',
    ])
      expect(actions.has(derived), derived).toBe(false)
    const backups = await a.req('GET', '/api/v1/audit?size=500&action=backups', { token: admin })
    expect((backups.body.data.items as Entry[]).map((e) => e.ok).sort()).toEqual([false, true])
  })
})

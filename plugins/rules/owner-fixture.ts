import { type Engine, type TestApp, makeApp } from '../../test/helpers'
import { httpSink } from '../notify/testing'

/**
 * The app of the owner tests (incident-owner.test.ts, escalation-owner.test.ts, test/security/alert-squat.test.ts): a
 * `pager` channel every `svc.*` notification goes to, an `oncall` one an escalation pages, the
 * rule `pages` (`svc.down`, escalating to oncall after 400 ms), the rule `holds` (`svc.db`,
 * escalating after an hour: a test makes one due by its `due_at`) and two trigger tokens, team A's
 * and team B's.
 */
export async function ownerApp(
  engine: Engine,
  o: {
    rules?: Record<string, unknown>
    config?: Record<string, unknown>
    /** More plugins beside these three (their settings). */
    plugins?: Record<string, unknown>
  } = {},
) {
  const pager = httpSink()
  const oncall = httpSink()
  const a: TestApp = await makeApp(engine, {
    plugins: {
      'webhook-provider': {},
      notify: {
        channels: {
          pager: { type: 'webhook', url: pager.url },
          oncall: { type: 'webhook', url: oncall.url },
        },
        routes: [{ type: 'svc.*', channels: ['pager'] }],
        retry: { base_ms: 10, max_ms: 50 },
      },
      rules: { sync_ms: 30, ...o.rules },
      ...o.plugins,
    },
    ...(o.config ? { config: o.config } : {}),
  })
  const admin = await a.token('admin')
  const rule = (id: string, match: string, escalation?: object) =>
    a.req('POST', '/api/v1/rules', {
      token: admin,
      body: {
        id,
        match,
        mode: 'active',
        route: [{ channels: ['pager'] }],
        ...(escalation ? { escalation } : {}),
      },
    })
  await rule('pages', 'type == "svc.down"', { ack_timeout: '400ms', to: ['oncall'] })
  await rule('holds', 'type == "svc.db"', { ack_timeout: '1h', to: ['oncall'] })
  const token = async (name: string) =>
    (await a.req('POST', '/api/v1/app-tokens', { token: admin, body: { name, scopes: ['trigger'] } })).body
      .data.token as string
  const teamA = await token('team-a')
  const teamB = await token('team-b')
  /** A notification sent with an application token or a user's Bearer token. */
  const notify = (credential: { app?: string; user?: string }, body: Record<string, unknown>) =>
    a.req('POST', '/api/v1/notify', {
      token: credential.user ?? null,
      headers: credential.app ? { 'x-app-token': credential.app } : {},
      body,
    })
  return {
    a,
    admin,
    teamA,
    teamB,
    rule,
    notify,
    raise: (app: string, alert: string) =>
      notify(
        { app },
        { type: 'svc.down', level: 'error', title: `down ${alert}`, params: { alert_id: alert } },
      ),
    /** A `svc.db` alert (the rule `holds`: its escalation is due in an hour). */
    hold: (app: string, alert: string) =>
      notify({ app }, { type: 'svc.db', level: 'error', title: `db ${alert}`, params: { alert_id: alert } }),
    resolved: (credential: { app?: string; user?: string }, alert: string, type = 'svc.down') =>
      notify(credential, {
        type,
        level: 'info',
        title: `up ${alert}`,
        params: { alert_id: alert, status: 'resolved' },
      }),
    /** Whether the oncall channel was paged for `alert`. */
    escalated: (alert: string) =>
      oncall.hits.some((h) => (h.body.raw as { params: { alert_id?: string } }).params.alert_id === alert),
    stop: async () => {
      await a.stop()
      pager.stop()
      oncall.stop()
    },
  }
}

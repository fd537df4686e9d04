import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { forEachEngine, until } from '../../test/helpers'
import { ownerApp } from './owner-fixture'

type Owners = Awaited<ReturnType<typeof ownerApp>>

/*
 * An incident resolves when a notification says its alert resolved (`params.status: resolved`)
 * or its rule stops matching it. Any holder of any trigger token could do either for any open
 * incident by naming its alert id: the incident closed and its escalation was cancelled, so
 * another team's page never came. Only the credential that opened an incident resolves it now.
 */

forEachEngine((engine) => {
  let f: Owners
  let a: Owners['a']
  let admin: string
  let teamA: string
  let teamB: string
  beforeAll(async () => {
    f = await ownerApp(engine)
    ;({ a, admin, teamA, teamB } = f)
    await f.rule('lag', 'type == "svc.lag" && params.lag > 30')
  })
  afterAll(() => f.stop())
  const notify: Owners['notify'] = (c, body) => f.notify(c, body)
  const raise: Owners['raise'] = (app, alert) => f.raise(app, alert)
  const resolved: Owners['resolved'] = (c, alert) => f.resolved(c, alert)
  const escalated: Owners['escalated'] = (alert) => f.escalated(alert)
  const incident = async (alert: string) => {
    const [one] = (await a.req('GET', `/api/v1/incidents?alert_id=${alert}`, { token: admin })).body.data
      .incidents
    return (await a.req('GET', `/api/v1/incidents/${one.id}`, { token: admin })).body.data
  }
  const kinds = (inc: { timeline: { kind: string }[] }) => inc.timeline.map((e) => e.kind)

  describe('who resolves an incident', () => {
    test("another trigger token's resolve is refused: the incident stays open, the timeline says why, the escalation fires", async () => {
      expect((await raise(teamA, 'own-1')).body.code).toBe(0)
      const r = await resolved({ app: teamB }, 'own-1')
      // The notification itself is accepted and delivered as any other.
      expect(r.body).toMatchObject({ code: 0, data: { accepted: ['pager'] } })
      const inc = await incident('own-1')
      expect(inc.resolved_at).toBeUndefined()
      expect(kinds(inc)).toEqual(['opened', 'escalation_armed', 'resolve_refused'])
      expect(inc.timeline[2].detail).toEqual({
        reason: 'alert resolved',
        caller: 'appToken',
        refused: 'another credential opened this incident: only its notifications resolve it',
      })
      // Nothing of the token's id or secret is shown.
      expect(JSON.stringify(inc)).not.toContain(teamB)
      await until(() => escalated('own-1'))
    })

    test('the same token resolves its own incident, cancelling its escalation', async () => {
      await raise(teamA, 'own-2')
      expect((await resolved({ app: teamA }, 'own-2')).body.code).toBe(0)
      const inc = await incident('own-2')
      expect(inc.resolved_at).toBeDefined()
      expect(kinds(inc)).toEqual(['opened', 'escalation_armed', 'resolved'])
      expect(inc.timeline[2].detail).toEqual({ reason: 'alert resolved' })
    })

    test("the rule stops matching: the opener's notification resolves, another token's is refused", async () => {
      const lag = (app: string, alert: string, n: number) =>
        notify({ app }, { type: 'svc.lag', title: `lag ${n}`, params: { alert_id: alert, lag: n } })
      await lag(teamA, 'lag-1', 40)
      await lag(teamB, 'lag-1', 5)
      let inc = await incident('lag-1')
      expect(inc.resolved_at).toBeUndefined()
      expect(inc.timeline.at(-1)).toMatchObject({
        kind: 'resolve_refused',
        detail: { reason: "rule 'lag' no longer matches", caller: 'appToken' },
      })
      await lag(teamA, 'lag-1', 5)
      inc = await incident('lag-1')
      expect(inc.resolved_at).toBeDefined()
      expect(inc.timeline.at(-1)).toMatchObject({
        kind: 'resolved',
        detail: { reason: "rule 'lag' no longer matches" },
      })
    })

    test('users are credentials too: another user is refused, the opener resolves', async () => {
      const operator = await a.token('operator')
      await notify(
        { user: admin },
        { type: 'svc.down', level: 'error', title: 'down', params: { alert_id: 'own-3' } },
      )
      await resolved({ user: operator }, 'own-3')
      await resolved({ app: teamA }, 'own-3')
      const inc = await incident('own-3')
      expect(inc.resolved_at).toBeUndefined()
      expect(
        inc.timeline
          .filter((e: { kind: string }) => e.kind === 'resolve_refused')
          .map((e: { detail: { caller: string } }) => e.detail.caller),
      ).toEqual(['user', 'appToken'])
      await resolved({ user: admin }, 'own-3')
      expect((await incident('own-3')).resolved_at).toBeDefined()
    })

    test('an incident opened before openers were kept resolves for any caller, as it did', async () => {
      await raise(teamA, 'own-4')
      await a.db.run('UPDATE rules_incidents SET opened_by = NULL WHERE alert_id = ?', ['own-4'])
      await resolved({ app: teamB }, 'own-4')
      expect((await incident('own-4')).resolved_at).toBeDefined()
    })

    test('an escalation with no open incident (armed while the ledger was off): only its armer cancels it', async () => {
      await raise(teamA, 'own-5')
      await a.db.run('DELETE FROM rules_incidents WHERE alert_id = ?', ['own-5'])
      const status = async () =>
        (
          await a.db.get<{ status: string }>('SELECT status FROM rules_escalations WHERE alert_id = ?', [
            'own-5',
          ])
        )?.status
      expect((await resolved({ app: teamB }, 'own-5')).body.code).toBe(0)
      expect(await status()).toBe('pending')
      await resolved({ app: teamA }, 'own-5')
      expect(await status()).toBe('cancelled')
    })

    test("a revoked token's incident and escalation go to the next credential that resolves the alert", async () => {
      const made = (
        await a.req('POST', '/api/v1/app-tokens', {
          token: admin,
          body: { name: 'rotated', scopes: ['trigger'] },
        })
      ).body.data
      // `svc.db`: its escalation is due in an hour, so it is pending throughout.
      expect((await f.hold(made.token, 'gone-1')).body.code).toBe(0)
      const escalation = async () =>
        (
          await a.db.get<{ status: string }>('SELECT status FROM rules_escalations WHERE alert_id = ?', [
            'gone-1',
          ])
        )?.status
      // While the token lives, another's resolve is refused.
      await resolved({ app: teamB }, 'gone-1', 'svc.db')
      expect((await incident('gone-1')).resolved_at).toBeUndefined()
      expect(await escalation()).toBe('pending')
      expect((await a.req('DELETE', `/api/v1/app-tokens/${made.id}`, { token: admin })).status).toBe(200)
      await resolved({ app: teamB }, 'gone-1', 'svc.db')
      const inc = await incident('gone-1')
      expect(inc.resolved_at).toBeDefined()
      expect(inc.timeline.at(-1)).toEqual(
        expect.objectContaining({
          kind: 'resolved',
          detail: { reason: 'alert resolved', opener_gone: 'appToken' },
        }),
      )
      expect(JSON.stringify(inc)).not.toContain(made.id)
      expect(await escalation()).toBe('cancelled')
    })

    test("a revoked token's escalation with no open incident is cancelled by the next resolve", async () => {
      const made = (
        await a.req('POST', '/api/v1/app-tokens', {
          token: admin,
          body: { name: 'rotated-2', scopes: ['trigger'] },
        })
      ).body.data
      await f.hold(made.token, 'gone-2')
      await a.db.run('DELETE FROM rules_incidents WHERE alert_id = ?', ['gone-2'])
      const status = async () =>
        (
          await a.db.get<{ status: string }>('SELECT status FROM rules_escalations WHERE alert_id = ?', [
            'gone-2',
          ])
        )?.status
      await resolved({ app: teamB }, 'gone-2', 'svc.db')
      expect(await status()).toBe('pending')
      await a.req('DELETE', `/api/v1/app-tokens/${made.id}`, { token: admin })
      await resolved({ app: teamB }, 'gone-2', 'svc.db')
      expect(await status()).toBe('cancelled')
    })
  })
})

import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { forEachEngine, until } from '../../test/helpers'
import { ownerApp } from './owner-fixture'

type Owners = Awaited<ReturnType<typeof ownerApp>>

/*
 * Without the incident ledger (`plugins.rules.incidents: false`) a notification saying an alert
 * resolved (`params.status: resolved`) cancels the alert's pending escalation and ends its
 * acknowledgement. Only the credential whose notification armed the escalation may do so: another
 * trigger token naming the alert id had silenced another team's page (incident-owner.test.ts
 * covers the same rule with the ledger on).
 */

forEachEngine((engine) => {
  let f: Owners
  let a: Owners['a']
  let admin: string
  let teamA: string
  let teamB: string
  const logFile = join(mkdtempSync(join(tmpdir(), 'liveops-esc-log-')), 'server.log')
  const logged = (msg: string) =>
    readFileSync(logFile, 'utf8')
      .split('\n')
      .filter((l) => l.includes(msg))
  beforeAll(async () => {
    f = await ownerApp(engine, {
      rules: { incidents: false },
      config: { log: { level: 'warn', format: 'json', file: logFile } },
    })
    ;({ a, admin, teamA, teamB } = f)
  })
  afterAll(() => f.stop())
  const raise = (app: string, alert: string) => f.raise(app, alert)
  const resolved = (app: string, alert: string) => f.resolved({ app }, alert)
  const status = async (alert: string) =>
    (await a.db.get<{ status: string }>('SELECT status FROM rules_escalations WHERE alert_id = ?', [alert]))
      ?.status
  const acknowledged = async (alert: string) =>
    (await a.req('GET', `/api/v1/alerts/${alert}`, { token: admin })).body.data.acknowledged as boolean
  const escalated = (alert: string) => f.escalated(alert)

  describe('who cancels an escalation (no incident ledger)', () => {
    test("another trigger token's resolve is accepted but cancels nothing: the escalation fires", async () => {
      expect((await raise(teamA, 'esc-1')).body.code).toBe(0)
      expect(await status('esc-1')).toBe('pending')
      const r = await resolved(teamB, 'esc-1')
      // The notification itself is accepted and delivered as any other.
      expect(r.body).toMatchObject({ code: 0, data: { accepted: ['pager'] } })
      expect(await status('esc-1')).toBe('pending')
      // Logged at warn with the alert and the caller's kind, nothing of the token.
      const [line, ...more] = logged('escalation cancel refused')
      expect(more).toEqual([])
      expect(JSON.parse(line)).toMatchObject({ level: 'warn', alert_id: 'esc-1', caller: 'appToken' })
      expect(line).not.toContain(teamB)
      expect(line).not.toContain('appToken:')
      await until(() => escalated('esc-1'))
      expect(await status('esc-1')).toBe('fired')
    })

    test("the opener's resolve cancels its escalation; no page comes", async () => {
      await raise(teamA, 'esc-2')
      expect(await status('esc-2')).toBe('pending')
      expect((await resolved(teamA, 'esc-2')).body.code).toBe(0)
      expect(await status('esc-2')).toBe('cancelled')
      // Past the timeout, another alert's page came and this one's did not.
      await raise(teamA, 'esc-2b')
      await until(() => escalated('esc-2b'))
      expect(escalated('esc-2')).toBe(false)
    })

    test("an acknowledgement ends with the opener's resolve, not with another token's", async () => {
      await raise(teamA, 'esc-3')
      expect((await a.req('POST', '/api/v1/alerts/esc-3/ack', { token: admin, body: {} })).body.code).toBe(0)
      expect(await status('esc-3')).toBe('cancelled')
      await resolved(teamB, 'esc-3')
      expect(await acknowledged('esc-3')).toBe(true)
      await resolved(teamA, 'esc-3')
      expect(await acknowledged('esc-3')).toBe(false)
    })

    test('an escalation armed before openers were kept is cancelled by any caller, as it was', async () => {
      await raise(teamA, 'esc-4')
      await a.db.run('UPDATE rules_escalations SET armed_by = NULL WHERE alert_id = ?', ['esc-4'])
      await resolved(teamB, 'esc-4')
      expect(await status('esc-4')).toBe('cancelled')
    })

    test('an id another token armed first: the team arms its own and cancels only its own (the rule `holds`, due in an hour)', async () => {
      const rows = () =>
        a.db.all<{ armed_by: string; status: string }>(
          'SELECT armed_by, status FROM rules_escalations WHERE alert_id = ?',
          ['esc-6'],
        )
      await f.hold(teamA, 'esc-6')
      const [squat] = await rows()
      await f.hold(teamB, 'esc-6')
      /** The squatter's status, then the team's. */
      const statuses = async () => {
        const all = await rows()
        expect(all.length).toBe(2)
        return [
          all.find((r) => r.armed_by === squat.armed_by)?.status,
          all.find((r) => r.armed_by !== squat.armed_by)?.status,
        ]
      }
      expect(await statuses()).toEqual(['pending', 'pending'])
      await f.resolved({ app: teamB }, 'esc-6', 'svc.db')
      expect(await statuses()).toEqual(['pending', 'cancelled'])
      await f.resolved({ app: teamA }, 'esc-6', 'svc.db')
      expect(await statuses()).toEqual(['cancelled', 'cancelled'])
    })
  })
})

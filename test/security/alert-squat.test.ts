import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { ownerApp } from '../../plugins/rules/owner-fixture'
import { forEachEngine, until } from '../helpers'

type Owners = Awaited<ReturnType<typeof ownerApp>>

/*
 * Alert-id squatting: the open incident and the pending escalation of an alert id had been found
 * by the id alone, so a trigger token that sent an id first (`db-down`) owned them for everyone.
 * Another team's notifications joined its incident, and that team could neither resolve its own
 * alert nor cancel its own escalation. Each credential now opens, joins, arms, resolves and
 * cancels its own; an acknowledgement is of the alert id and acknowledges every one of them.
 * The rule `holds` escalates after an hour: a test makes an escalation due through its `due_at`.
 */

type Incident = { id: string; events: number; acked_at?: string; resolved_at?: string }
type Escalation = { id: string; armed_by: string | null; status: string }

forEachEngine((engine) => {
  let f: Owners
  let a: Owners['a']
  let admin: string
  let teamA: string
  let teamB: string
  beforeAll(async () => {
    f = await ownerApp(engine)
    ;({ a, admin, teamA, teamB } = f)
  })
  afterAll(() => f.stop())
  const hold = (app: string, alert: string) => f.hold(app, alert)
  const resolved = (app: string, alert: string) => f.resolved({ app }, alert, 'svc.db')
  /** The alert's incidents, whoever opened them, newest first. */
  const incidents = async (alert: string): Promise<Incident[]> =>
    (await a.req('GET', `/api/v1/incidents?alert_id=${alert}`, { token: admin })).body.data.incidents
  const incident = async (id: string) =>
    (await a.req('GET', `/api/v1/incidents/${id}`, { token: admin })).body.data
  const kinds = async (id: string) => (await incident(id)).timeline.map((e: { kind: string }) => e.kind)
  const escalations = (alert: string) =>
    a.db.all<Escalation>(
      'SELECT id, armed_by, status FROM rules_escalations WHERE alert_id = ? ORDER BY created_at, id',
      [alert],
    )
  const status = async (id: string) =>
    (await a.db.get<{ status: string }>('SELECT status FROM rules_escalations WHERE id = ?', [id]))?.status
  const acknowledged = async (alert: string) =>
    (await a.req('GET', `/api/v1/alerts/${alert}`, { token: admin })).body.data.acknowledged as boolean
  /** Team A squats the id; then team B sends it twice. Returns A's and B's incident and escalation ids. */
  const squatted = async (alert: string) => {
    expect((await hold(teamA, alert)).body.code).toBe(0)
    const [squat] = await incidents(alert)
    const [aEsc] = await escalations(alert)
    expect((await hold(teamB, alert)).body.code).toBe(0)
    expect((await hold(teamB, alert)).body.code).toBe(0)
    const both = await incidents(alert)
    expect(both.length).toBe(2)
    const own = both.find((i) => i.id !== squat.id)!
    const bEsc = (await escalations(alert)).find((e) => e.id !== aEsc.id)!
    return { aInc: squat.id, bInc: own.id, aEsc: aEsc.id, bEsc: bEsc.id }
  }

  describe('an alert id another credential sent first', () => {
    test("opens and arms the team's own; its resolve resolves and cancels only its own, the squatter's fires and resolves by its own", async () => {
      const { aInc, bInc, aEsc, bEsc } = await squatted('db-down')
      // B's two events went to B's incident; A's incident has its one.
      expect((await incident(aInc)).events).toBe(1)
      expect((await incident(bInc)).events).toBe(2)
      expect(await kinds(aInc)).toEqual(['opened', 'escalation_armed'])
      expect(await kinds(bInc)).toEqual(['opened', 'escalation_armed', 'event'])
      const esc = await escalations('db-down')
      expect(esc.map((e) => e.status)).toEqual(['pending', 'pending'])
      expect(new Set(esc.map((e) => e.armed_by)).size).toBe(2)

      // A's escalation comes due and pages; A's incident's timeline says so, not B's (the newer).
      await a.db.run('UPDATE rules_escalations SET due_at = 0 WHERE id = ?', [aEsc])
      await until(() => f.escalated('db-down'))
      await until(async () => (await kinds(aInc)).includes('escalated'))
      expect(await status(aEsc)).toBe('fired')
      expect(await kinds(bInc)).toEqual(['opened', 'escalation_armed', 'event'])

      expect((await resolved(teamB, 'db-down')).body.code).toBe(0)
      expect((await incident(bInc)).resolved_at).toBeDefined()
      expect(await kinds(bInc)).toEqual(['opened', 'escalation_armed', 'event', 'resolved'])
      expect((await incident(aInc)).resolved_at).toBeUndefined()
      expect(await kinds(aInc)).toEqual(['opened', 'escalation_armed', 'escalated'])
      expect([await status(aEsc), await status(bEsc)]).toEqual(['fired', 'cancelled'])

      await resolved(teamA, 'db-down')
      expect((await incident(aInc)).resolved_at).toBeDefined()
    })

    test("the squatter's resolve resolves its own and leaves the team's incident and escalation", async () => {
      const { aInc, bInc, aEsc, bEsc } = await squatted('db-lag')
      await resolved(teamA, 'db-lag')
      expect((await incident(aInc)).resolved_at).toBeDefined()
      expect((await incident(bInc)).resolved_at).toBeUndefined()
      expect(await kinds(bInc)).toEqual(['opened', 'escalation_armed', 'event'])
      expect([await status(aEsc), await status(bEsc)]).toEqual(['cancelled', 'pending'])
      await resolved(teamB, 'db-lag')
      expect((await incident(bInc)).resolved_at).toBeDefined()
      expect(await status(bEsc)).toBe('cancelled')
    })

    test('an ack of the id acknowledges both; a resolve ends the ack, and the other incident stays acknowledged without re-arming', async () => {
      const { aInc, bInc, aEsc, bEsc } = await squatted('db-ack')
      const ack = await a.req('POST', '/api/v1/alerts/db-ack/ack', { token: admin, body: {} })
      expect(ack.body.code).toBe(0)
      expect(await acknowledged('db-ack')).toBe(true)
      expect((await incident(aInc)).acked_at).toBeDefined()
      expect((await incident(bInc)).acked_at).toBeDefined()
      expect([await status(aEsc), await status(bEsc)]).toEqual(['cancelled', 'cancelled'])

      await resolved(teamB, 'db-ack')
      expect((await incident(bInc)).resolved_at).toBeDefined()
      expect(await acknowledged('db-ack')).toBe(false)
      // A's incident is still acknowledged: its next event joins it and arms nothing.
      await hold(teamA, 'db-ack')
      const inc = await incident(aInc)
      expect(inc.events).toBe(2)
      expect(inc.acked_at).toBeDefined()
      expect(inc.resolved_at).toBeUndefined()
      expect((await escalations('db-ack')).map((e) => e.status)).toEqual(['cancelled', 'cancelled'])

      // Resolved, A's next firing opens a new incident and escalates anew.
      await resolved(teamA, 'db-ack')
      expect((await incident(aInc)).resolved_at).toBeDefined()
      await hold(teamA, 'db-ack')
      expect((await incidents('db-ack')).length).toBe(3)
      expect(await status(aEsc)).toBe('pending')
    })

    test('rows from before openers and armers were kept stay anyone’s: another team joins, arms nothing more, resolves and cancels', async () => {
      await hold(teamA, 'db-old')
      await a.db.run('UPDATE rules_incidents SET opened_by = NULL WHERE alert_id = ?', ['db-old'])
      await a.db.run('UPDATE rules_escalations SET armed_by = NULL WHERE alert_id = ?', ['db-old'])
      await hold(teamB, 'db-old')
      const [only, ...more] = await incidents('db-old')
      expect(more).toEqual([])
      expect(only.events).toBe(2)
      const esc = await escalations('db-old')
      expect(esc.map((e) => [e.armed_by, e.status])).toEqual([[null, 'pending']])
      await resolved(teamB, 'db-old')
      expect((await incident(only.id)).resolved_at).toBeDefined()
      expect(await status(esc[0].id)).toBe('cancelled')
    })
  })
})

import { expect, test } from 'bun:test'
import { migrate } from '../../core/db'
import { forEachEngine, rawDb } from '../../test/helpers'
import { alertStore } from './alerts'
import { incidentStore } from './incidents'
import rules from './index'

/*
 * Rules migration 004 keys escalations by (alert id, armer) instead of the alert id: the rows kept
 * from before take their alert id as their id and keep their armer, NULL (anyone's) included.
 */

const DAY = 86_400_000

forEachEngine((engine) => {
  test('escalations from before migration 004 are kept as they were and behave as before', async () => {
    const { db, done } = await rawDb(engine)
    try {
      const all = rules.migrations ?? []
      await migrate(db, [{ plugin: 'rules', migrations: all.filter((m) => m.id < 4) }])
      const insert = (alert: string, armedBy: string | null, status: string) =>
        db.run(
          `INSERT INTO rules_escalations (alert_id, rule_id, due_at, targets, title, level, status, created_at, armed_by)
           VALUES (?, 'r', ?, '["oncall"]', 't', 'error', ?, 1, ?)`,
          [alert, DAY, status, armedBy],
        )
      await insert('old-1', null, 'pending')
      await insert('old-2', 'appToken:a', 'pending')
      await insert('old-3', 'appToken:a', 'fired')
      await migrate(db, [{ plugin: 'rules', migrations: all }])
      expect(
        await db.all('SELECT id, alert_id, armed_by, status FROM rules_escalations ORDER BY alert_id'),
      ).toEqual([
        { id: 'old-1', alert_id: 'old-1', armed_by: null, status: 'pending' },
        { id: 'old-2', alert_id: 'old-2', armed_by: 'appToken:a', status: 'pending' },
        { id: 'old-3', alert_id: 'old-3', armed_by: 'appToken:a', status: 'fired' },
      ])

      const alerts = alertStore(db, incidentStore(db))
      const arm = (alert: string, by: string) =>
        alerts.arm({
          alert_id: alert,
          rule_id: 'r',
          due_at: 2 * DAY,
          to: ['oncall'],
          title: 't',
          level: 'error',
          armed_by: by,
        })
      // A pending escalation from before armers were kept is anyone's: no second one is armed.
      expect(await arm('old-1', 'appToken:b')).toBe(false)
      // Another credential arms its own beside a kept one, once; the kept armer re-arms its fired one.
      expect(await arm('old-2', 'appToken:b')).toBe(true)
      expect(await arm('old-2', 'appToken:b')).toBe(false)
      expect(await arm('old-3', 'appToken:a')).toBe(true)
      expect(
        await db.all('SELECT armed_by, status FROM rules_escalations WHERE alert_id = ? ORDER BY armed_by', [
          'old-2',
        ]),
      ).toEqual([
        { armed_by: 'appToken:a', status: 'pending' },
        { armed_by: 'appToken:b', status: 'pending' },
      ])
      // Anyone cancels the one from before; another credential's resolve leaves a kept armer's.
      expect(await alerts.cancel('old-1', 'appToken:b')).toBe(true)
      expect(await alerts.cancel('old-3', 'appToken:b')).toBe(false)
      const due = await alerts.claimDue(3 * DAY)
      expect(due.map((d) => [d.alert_id, d.armed_by, d.due_at]).sort()).toEqual([
        ['old-2', 'appToken:a', DAY],
        ['old-2', 'appToken:b', 2 * DAY],
        ['old-3', 'appToken:a', 2 * DAY],
      ])
      expect(await db.all("SELECT id FROM rules_escalations WHERE status <> 'fired' ORDER BY id")).toEqual([
        { id: 'old-1' },
      ])
    } finally {
      await done()
    }
  })
})

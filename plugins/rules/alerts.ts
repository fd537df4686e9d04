import { type Db, fromJson, iso } from '../../core/db'
import { alertKey } from './alert-id'
import type { IncidentStore } from './incidents'

type AckRow = { alert_id: string; acked_by: string; source: string; acked_at: number }
const toAck = (r: AckRow) => ({
  alert_id: r.alert_id,
  acked_by: r.acked_by,
  source: r.source,
  acked_at: iso(r.acked_at)!,
})
export type AckRecord = ReturnType<typeof toAck>

export interface DueEscalation {
  alert_id: string
  rule_id: string
  due_at: number
  to: string[]
  title: string
  level: string
}

/** What arming takes: the escalation and the credential whose notification armed it (`RoutingInput.caller`). */
export interface Arming extends DueEscalation {
  armed_by: string
}

/**
 * Acknowledgements and pending escalations, both in the store: an escalation due while the
 * process was down fires after it starts, and an acknowledgement taken by any instance cancels
 * the escalation every other instance would fire (the claim is a conditional update). Every
 * method takes an alert id as sent and keeps and compares it as `alertKey` does.
 */
export function alertStore(db: Db, incidents: IncidentStore | undefined) {
  return {
    async get(raw: string) {
      const alertId = alertKey(raw)
      const row = await db.get<AckRow>(
        'SELECT alert_id, acked_by, source, acked_at FROM rules_acks WHERE alert_id = ?',
        [alertId],
      )
      return row
        ? { alert_id: alertId, acknowledged: true, ack: toAck(row) }
        : { alert_id: alertId, acknowledged: false }
    },
    /** Whether the alert was raised: an incident or an escalation names it, or it was acknowledged. */
    async exists(raw: string): Promise<boolean> {
      const alertId = alertKey(raw)
      const row = await db.get(
        `SELECT 1 AS one FROM rules_incidents WHERE alert_id = ?
         UNION ALL SELECT 1 AS one FROM rules_escalations WHERE alert_id = ?
         UNION ALL SELECT 1 AS one FROM rules_acks WHERE alert_id = ?`,
        [alertId, alertId, alertId],
      )
      return !!row
    },
    /** Idempotent: the first acknowledgement is kept and returned to every repeat. */
    async ack(raw: string, ackedBy: string, source: string, now = Date.now()): Promise<AckRecord> {
      const alertId = alertKey(raw)
      return db.tx(async (tx) => {
        const inserted = await tx.get<AckRow>(
          `INSERT INTO rules_acks (alert_id, acked_by, source, acked_at) VALUES (?, ?, ?, ?)
           ON CONFLICT (alert_id) DO NOTHING RETURNING alert_id, acked_by, source, acked_at`,
          [alertId, ackedBy, source, now],
        )
        if (!inserted) {
          const first = await tx.get<AckRow>(
            'SELECT alert_id, acked_by, source, acked_at FROM rules_acks WHERE alert_id = ?',
            [alertId],
          )
          return toAck(first!)
        }
        await tx.run(
          "UPDATE rules_escalations SET status = 'cancelled', finished_at = ? WHERE alert_id = ? AND status = 'pending'",
          [now, alertId],
        )
        await incidents?.ack(tx, alertId, now, ackedBy, source)
        return toAck(inserted)
      })
    },
    /**
     * Arms the alert's escalation unless it is acknowledged or one is already pending (whose
     * `armed_by` is kept: another credential's notification neither re-arms nor takes it over).
     */
    async arm(raw: Arming, now = Date.now()): Promise<boolean> {
      const e = { ...raw, alert_id: alertKey(raw.alert_id) }
      return db.tx(async (tx) => {
        if (await tx.get('SELECT alert_id FROM rules_acks WHERE alert_id = ?', [e.alert_id])) return false
        const n = await tx.run(
          `INSERT INTO rules_escalations (alert_id, rule_id, due_at, targets, title, level, status, created_at, armed_by)
           VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?)
           ON CONFLICT (alert_id) DO UPDATE SET rule_id = excluded.rule_id, due_at = excluded.due_at,
             targets = excluded.targets, title = excluded.title, level = excluded.level, status = 'pending',
             created_at = excluded.created_at, finished_at = NULL, armed_by = excluded.armed_by
           WHERE rules_escalations.status <> 'pending'`,
          [e.alert_id, e.rule_id, e.due_at, JSON.stringify(e.to), e.title, e.level, now, e.armed_by],
        )
        return n > 0
      })
    },
    async pending(raw: string) {
      const alertId = alertKey(raw)
      return db.get<{ status: string; due_at: number }>(
        'SELECT status, due_at FROM rules_escalations WHERE alert_id = ?',
        [alertId],
      )
    },
    /**
     * The alert resolved: its pending escalation is cancelled and its acknowledgement ends, so its
     * next firing escalates and is acknowledged anew. (An acknowledgement kept forever silenced
     * every later incident of the id, and a trigger token could raise, acknowledge and resolve an
     * id ahead of the real alert.)
     *
     * With `by` (a resolve no open incident decided), only the credential that armed the alert's
     * escalation does either: another's changes nothing and answers false. An escalation armed
     * before armers were kept (`armed_by` NULL), or none at all, is cancelled by any caller. Without
     * `by` (the incident's opener resolved it) the cancel is unconditional.
     */
    async cancel(raw: string, by?: string, now = Date.now()): Promise<boolean> {
      const alertId = alertKey(raw)
      return db.tx(async (tx) => {
        if (by !== undefined) {
          const armed = await tx.get<{ armed_by: string | null }>(
            'SELECT armed_by FROM rules_escalations WHERE alert_id = ?',
            [alertId],
          )
          if (armed && armed.armed_by !== null && armed.armed_by !== by) return false
        }
        // The condition again in SQL: another credential may have re-armed it since the read.
        await tx.run(
          `UPDATE rules_escalations SET status = 'cancelled', finished_at = ?
           WHERE alert_id = ? AND status = 'pending' AND (CAST(? AS TEXT) IS NULL OR armed_by IS NULL OR armed_by = ?)`,
          [now, alertId, by ?? null, by ?? null],
        )
        await tx.run('DELETE FROM rules_acks WHERE alert_id = ?', [alertId])
        return true
      })
    },
    /** Claims the due escalations; each is claimed by exactly one instance. */
    async claimDue(now = Date.now()): Promise<DueEscalation[]> {
      const due = await db.all<{
        alert_id: string
        rule_id: string
        due_at: number
        targets: string
        title: string
        level: string
      }>(
        "SELECT alert_id, rule_id, due_at, targets, title, level FROM rules_escalations WHERE status = 'pending' AND due_at <= ? ORDER BY due_at LIMIT 100",
        [now],
      )
      const out: DueEscalation[] = []
      for (const d of due) {
        const n = await db.run(
          "UPDATE rules_escalations SET status = 'fired', finished_at = ? WHERE alert_id = ? AND status = 'pending'",
          [now, d.alert_id],
        )
        if (n)
          out.push({
            alert_id: d.alert_id,
            rule_id: d.rule_id,
            due_at: Number(d.due_at),
            to: fromJson(d.targets, []),
            title: d.title,
            level: d.level,
          })
      }
      return out
    },
  }
}
export type AlertStore = ReturnType<typeof alertStore>

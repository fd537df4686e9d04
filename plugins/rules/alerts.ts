import { type Db, fromJson, iso, newId } from '../../core/db'
import { alertKey } from './alert-id'
import { type Gone, type IncidentStore, goneHolders } from './incidents'

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
  /** The credential whose notification armed it; null for one armed before armers were kept. */
  armed_by: string | null
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
 *
 * An acknowledgement is of an alert id (spec 2: `POST /alerts/{id}/ack`, one record per id); an
 * escalation is of an alert id and the credential that armed it (rules migration 004), so two
 * teams sending the same id each arm and cancel their own. An escalation armed before armers were
 * kept (`armed_by` NULL) is anyone's, as it was.
 */
export function alertStore(db: Db, incidents: IncidentStore | undefined, gone?: Gone) {
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
        // The acknowledgement is the alert id's: every credential's pending escalation and open incident of it.
        await tx.run(
          "UPDATE rules_escalations SET status = 'cancelled', finished_at = ? WHERE alert_id = ? AND status = 'pending'",
          [now, alertId],
        )
        await incidents?.ack(tx, alertId, now, ackedBy, source)
        return toAck(inserted)
      })
    },
    /**
     * Arms the escalation of the alert and `armed_by` unless the alert id is acknowledged, the
     * credential's own open incident of it was, or one is already pending for that credential
     * (or one armed before armers were kept, anyone's). Another credential's pending escalation of
     * the same id neither stops it nor is taken over.
     */
    async arm(raw: Arming, now = Date.now()): Promise<boolean> {
      const e = { ...raw, alert_id: alertKey(raw.alert_id) }
      return db.tx(async (tx) => {
        if (await tx.get('SELECT alert_id FROM rules_acks WHERE alert_id = ?', [e.alert_id])) return false
        // Another credential's resolve may have ended the id's acknowledgement: this one's incident stays acknowledged.
        if (await incidents?.ackedFor(tx, e.alert_id, e.armed_by)) return false
        if (
          await tx.get(
            "SELECT 1 AS one FROM rules_escalations WHERE alert_id = ? AND armed_by IS NULL AND status = 'pending'",
            [e.alert_id],
          )
        )
          return false
        // Re-armed when its last one fired or was cancelled, else inserted when there is none: a
        // conditional update and an insert that leaves a conflict alone count on every engine (a
        // guarded upsert does not on MySQL, where FOUND_ROWS counts the row it found unchanged).
        const rearmed = await tx.run(
          `UPDATE rules_escalations SET rule_id = ?, due_at = ?, targets = ?, title = ?, level = ?, status = 'pending',
             created_at = ?, finished_at = NULL
           WHERE alert_id = ? AND armed_by = ? AND status <> 'pending'`,
          [e.rule_id, e.due_at, JSON.stringify(e.to), e.title, e.level, now, e.alert_id, e.armed_by],
        )
        if (rearmed > 0) return true
        const inserted = await tx.run(
          `INSERT INTO rules_escalations (id, alert_id, rule_id, due_at, targets, title, level, status, created_at, armed_by)
           VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?) ON CONFLICT (alert_id, armed_by) DO NOTHING`,
          [newId(), e.alert_id, e.rule_id, e.due_at, JSON.stringify(e.to), e.title, e.level, now, e.armed_by],
        )
        return inserted > 0
      })
    },
    /**
     * `by`'s alert resolved: its pending escalation of the alert is cancelled (and one armed before
     * armers were kept), and the alert id's acknowledgement ends, so the next firing escalates and
     * is acknowledged anew. (An acknowledgement kept forever silenced every later incident of the
     * id, and a trigger token could raise, acknowledge and resolve an id ahead of the real alert.)
     *
     * Refused (false, nothing changes) when `by` neither resolved an incident of its own
     * (`resolvedIncident`) nor has an escalation of the alert while another credential has one:
     * another team's `resolved` naming the id had silenced its page. An alert with no escalation at
     * all is `resolved` by any caller, as before. Another live credential's escalation is never
     * cancelled here; its incident, if acknowledged, stays so and its escalation is not re-armed
     * (`arm`). One armed by a credential that is gone (a deleted user, a revoked token) is
     * anyone's: it is cancelled with `by`'s.
     */
    async cancel(raw: string, by: string, resolvedIncident = false, now = Date.now()): Promise<boolean> {
      const alertId = alertKey(raw)
      const orphaned = await goneHolders(db, gone, {
        table: 'rules_escalations',
        col: 'armed_by',
        open: "status = 'pending'",
        alertId,
        by,
      })
      return db.tx(async (tx) => {
        if (!resolvedIncident) {
          const all = await tx.all<{ armed_by: string | null }>(
            'SELECT armed_by FROM rules_escalations WHERE alert_id = ?',
            [alertId],
          )
          const held = all.some(
            (r) => r.armed_by === null || r.armed_by === by || orphaned.holders.includes(r.armed_by),
          )
          if (all.length && !held) return false
        }
        await tx.run(
          `UPDATE rules_escalations SET status = 'cancelled', finished_at = ?
           WHERE alert_id = ? AND status = 'pending' AND (armed_by IS NULL OR armed_by = ?${orphaned.also})`,
          [now, alertId, by, ...orphaned.holders],
        )
        await tx.run('DELETE FROM rules_acks WHERE alert_id = ?', [alertId])
        return true
      })
    },
    /** Claims the due escalations; each is claimed by exactly one instance. */
    async claimDue(now = Date.now()): Promise<DueEscalation[]> {
      const due = await db.all<{
        id: string
        alert_id: string
        armed_by: string | null
        rule_id: string
        due_at: number
        targets: string
        title: string
        level: string
      }>(
        "SELECT id, alert_id, armed_by, rule_id, due_at, targets, title, level FROM rules_escalations WHERE status = 'pending' AND due_at <= ? ORDER BY due_at LIMIT 100",
        [now],
      )
      const out: DueEscalation[] = []
      for (const d of due) {
        const n = await db.run(
          "UPDATE rules_escalations SET status = 'fired', finished_at = ? WHERE id = ? AND status = 'pending'",
          [now, d.id],
        )
        if (n)
          out.push({
            alert_id: d.alert_id,
            rule_id: d.rule_id,
            due_at: Number(d.due_at),
            to: fromJson(d.targets, []),
            title: d.title,
            level: d.level,
            armed_by: d.armed_by,
          })
      }
      return out
    },
  }
}
export type AlertStore = ReturnType<typeof alertStore>

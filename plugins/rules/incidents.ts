import { type Db, fromJson, iso, newId } from '../../core/db'
import { cut } from '../../core/event-bounds'
import { NotFound } from '../../core/http'
import { alertKey } from './alert-id'

/** Which of these callers no longer name a credential (core/auth/gone.ts `goneCredentials`). */
export type Gone = (callers: readonly string[]) => Promise<Set<string>>

/**
 * The holders (`col`: openers, armers) of an alert id's open rows of `table` (`open`) other than
 * `by` whose credential is gone: their rows are anyone's (`resolve`, `cancel` in alerts.ts). With
 * `also`, the condition that takes them in (` OR col IN (...)`, empty when none), and its values.
 */
export async function goneHolders(
  db: Db,
  gone: Gone | undefined,
  o: { table: string; col: string; open: string; alertId: string; by: string },
): Promise<{ also: string; holders: string[] }> {
  const none = { also: '', holders: [] }
  if (!gone) return none
  const rows = await db.all<{ h: string | null }>(
    `SELECT DISTINCT ${o.col} AS h FROM ${o.table} WHERE alert_id = ? AND ${o.open}`,
    [o.alertId],
  )
  const others = rows.map((r) => r.h).filter((h): h is string => h !== null && h !== o.by)
  const holders = others.length ? [...(await gone(others))] : []
  if (!holders.length) return none
  return { also: ` OR ${o.col} IN (${holders.map(() => '?').join(', ')})`, holders }
}

type IncidentRow = {
  id: string
  rule_id: string
  alert_id: string
  title: string
  level: string
  opened_at: number
  acked_at: number | null
  resolved_at: number | null
  events: number
  channels: string
}
const COLS = 'id, rule_id, alert_id, title, level, opened_at, acked_at, resolved_at, events, channels'

const toIncident = (r: IncidentRow) => ({
  id: r.id,
  rule_id: r.rule_id,
  alert_id: r.alert_id,
  title: r.title,
  level: r.level,
  opened_at: iso(r.opened_at)!,
  ...(r.acked_at !== null ? { acked_at: iso(r.acked_at) } : {}),
  ...(r.resolved_at !== null ? { resolved_at: iso(r.resolved_at) } : {}),
  events: Number(r.events),
  channels: fromJson<string[]>(r.channels, []),
})

/**
 * An incident read shows the newest TIMELINE_DEFAULT timeline entries (`limit` up to TIMELINE_MAX)
 * and how many there are; a timeline entry keeps EVENT_TITLE characters of its notification's
 * title. One alert id's 5,881 events, each with the full 10 KB title, had made one read 60 MB.
 */
export const TIMELINE_DEFAULT = 200
export const TIMELINE_MAX = 1000
const EVENT_TITLE = 256

export const INCIDENT_STATUSES = ['open', 'acked', 'resolved'] as const
export type IncidentStatus = (typeof INCIDENT_STATUSES)[number]

/** The derived status (spec 2 "Incident (derived)") as a SQL condition. */
const STATUS_SQL: Record<IncidentStatus, string> = {
  open: 'resolved_at IS NULL AND acked_at IS NULL',
  acked: 'resolved_at IS NULL AND acked_at IS NOT NULL',
  resolved: 'resolved_at IS NOT NULL',
}

async function event(tx: Db, incident: string, at: number, kind: string, detail: Record<string, unknown>) {
  await tx.run(
    'INSERT INTO rules_incident_events (id, incident_id, at, kind, detail) VALUES (?, ?, ?, ?, ?)',
    [newId(), incident, at, kind, JSON.stringify(detail)],
  )
}

/** What a refused resolve's timeline entry says of its caller: the kind of credential, never its id. */
export const callerKind = (by: string) => by.split(':', 1)[0]

/** Open incidents of an alert id that `by` holds: its own, or one opened before openers were kept. */
const HELD = 'alert_id = ? AND resolved_at IS NULL AND (opened_by = ? OR opened_by IS NULL)'
/** Its own first, then one opened before openers were kept, newest first. */
const HELD_ORDER = 'ORDER BY CASE WHEN opened_by IS NULL THEN 1 ELSE 0 END, opened_at DESC'

/**
 * The incident ledger: one open incident per alert id and credential at a time, opened by a
 * rule-routed delivery, acknowledged by the first ack of its alert id, resolved when the alert
 * says so or its rule stops matching it, by a notification of the credential that opened it.
 * Another credential's notification under the same alert id opens and joins an incident of its
 * own (an id held by whoever sent it first had taken in every other team's events). An incident
 * opened before openers were kept (`opened_by` NULL) is anyone's, as it was. Every change leaves a
 * timeline entry {at, kind, detail}. Alert ids are taken as sent and kept and compared as
 * `alertKey` does.
 */
export function incidentStore(db: Db, gone?: Gone) {
  return {
    /** A rule-routed delivery for an alert: opens an incident or adds the event to the open one. */
    async record(
      ruleId: string,
      raw: string,
      n: { title: string; level: string },
      channels: string[],
      notificationId: string,
      /** The credential of the notification (`RoutingInput.caller`, `platform` for the platform's own). */
      openedBy: string,
      now = Date.now(),
    ) {
      const alertId = alertKey(raw)
      await db.tx(async (tx) => {
        const open = await tx.get<IncidentRow>(
          `SELECT ${COLS} FROM rules_incidents WHERE ${HELD} ${HELD_ORDER}`,
          [alertId, openedBy],
        )
        if (open) {
          const merged = [...new Set([...fromJson<string[]>(open.channels, []), ...channels])]
          await tx.run('UPDATE rules_incidents SET events = events + 1, channels = ? WHERE id = ?', [
            JSON.stringify(merged),
            open.id,
          ])
          await event(tx, open.id, now, 'event', {
            notification_id: notificationId,
            title: cut(n.title, EVENT_TITLE),
            channels,
          })
          return
        }
        const id = newId()
        await tx.run(
          `INSERT INTO rules_incidents (${COLS}, opened_by) VALUES (?, ?, ?, ?, ?, ?, NULL, NULL, 1, ?, ?)`,
          [id, ruleId, alertId, n.title, n.level, now, JSON.stringify(channels), openedBy],
        )
        await event(tx, id, now, 'opened', { rule_id: ruleId, notification_id: notificationId, channels })
      })
    },
    /** Marks every open incident of the alert id acknowledged, whoever opened it (inside the ack's transaction). */
    async ack(tx: Db, raw: string, at: number, by: string, source: string) {
      const alertId = alertKey(raw)
      const rows = await tx.all<{ id: string }>(
        'UPDATE rules_incidents SET acked_at = ? WHERE alert_id = ? AND resolved_at IS NULL AND acked_at IS NULL RETURNING id',
        [at, alertId],
      )
      for (const r of rows) await event(tx, r.id, at, 'acknowledged', { acked_by: by, source })
    },
    /** Whether `by` holds an open incident of the alert that was acknowledged (inside `arm`'s transaction). */
    async ackedFor(tx: Db, raw: string, by: string): Promise<boolean> {
      return !!(await tx.get(`SELECT 1 AS one FROM rules_incidents WHERE ${HELD} AND acked_at IS NOT NULL`, [
        alertKey(raw),
        by,
      ]))
    },
    /** The open incident of the alert that `by` holds, else the newest open one of another credential. */
    async openFor(raw: string, by: string): Promise<{ id: string; rule_id: string } | undefined> {
      const alertId = alertKey(raw)
      return (
        (await db.get<{ id: string; rule_id: string }>(
          `SELECT id, rule_id FROM rules_incidents WHERE ${HELD} ${HELD_ORDER}`,
          [alertId, by],
        )) ??
        (await db.get(
          'SELECT id, rule_id FROM rules_incidents WHERE alert_id = ? AND resolved_at IS NULL ORDER BY opened_at DESC',
          [alertId],
        ))
      )
    },
    /**
     * Resolves the alert's open incidents that `by` holds (its own, any opened before openers
     * were kept, and any whose opener is gone: a deleted user, a revoked token, named by kind in
     * the entry's `opener_gone`); true when it did. Where `by` holds none, its resolve is
     * refused: it leaves a timeline entry `resolve_refused` naming the caller's kind on the
     * newest open incident of another credential, which stays open. Any trigger token had resolved any incident by naming
     * its alert id, cancelling another team's escalation.
     */
    async resolve(raw: string, reason: string, by: string, now = Date.now()): Promise<boolean> {
      const alertId = alertKey(raw)
      const orphaned = await goneHolders(db, gone, {
        table: 'rules_incidents',
        col: 'opened_by',
        open: 'resolved_at IS NULL',
        alertId,
        by,
      })
      return db.tx(async (tx) => {
        const rows = await tx.all<{ id: string; opened_by: string | null }>(
          `UPDATE rules_incidents SET resolved_at = ?
           WHERE alert_id = ? AND resolved_at IS NULL AND (opened_by IS NULL OR opened_by = ?${orphaned.also})
           RETURNING id, opened_by`,
          [now, alertId, by, ...orphaned.holders],
        )
        for (const r of rows)
          await event(
            tx,
            r.id,
            now,
            'resolved',
            r.opened_by !== null && r.opened_by !== by
              ? { reason, opener_gone: callerKind(r.opened_by) }
              : { reason },
          )
        if (rows.length) return true
        const open = await tx.get<{ id: string }>(
          'SELECT id FROM rules_incidents WHERE alert_id = ? AND resolved_at IS NULL ORDER BY opened_at DESC',
          [alertId],
        )
        if (open)
          await event(tx, open.id, now, 'resolve_refused', {
            reason,
            caller: callerKind(by),
            refused: 'another credential opened this incident: only its notifications resolve it',
          })
        return false
      })
    },
    /**
     * A timeline entry on the open incident that `by` holds (the credential that armed an
     * escalation); with `by` null (an escalation armed before armers were kept), on the newest.
     */
    async note(
      raw: string,
      by: string | null,
      kind: string,
      detail: Record<string, unknown>,
      now = Date.now(),
    ) {
      const alertId = alertKey(raw)
      await db.tx(async (tx) => {
        const open =
          by === null
            ? await tx.get<{ id: string }>(
                'SELECT id FROM rules_incidents WHERE alert_id = ? AND resolved_at IS NULL ORDER BY opened_at DESC',
                [alertId],
              )
            : await tx.get<{ id: string }>(`SELECT id FROM rules_incidents WHERE ${HELD} ${HELD_ORDER}`, [
                alertId,
                by,
              ])
        if (open) await event(tx, open.id, now, kind, detail)
      })
    },
    async list(f: { status?: IncidentStatus; rule_id?: string; alert_id?: string; limit: number }) {
      const alertId = f.alert_id === undefined ? null : alertKey(f.alert_id)
      const where = ['(CAST(? AS TEXT) IS NULL OR rule_id = ?)', '(CAST(? AS TEXT) IS NULL OR alert_id = ?)']
      if (f.status) where.push(STATUS_SQL[f.status])
      const rows = await db.all<IncidentRow>(
        `SELECT ${COLS} FROM rules_incidents WHERE ${where.join(' AND ')} ORDER BY opened_at DESC, id DESC LIMIT ?`,
        [f.rule_id ?? null, f.rule_id ?? null, alertId, alertId, f.limit],
      )
      return rows.map(toIncident)
    },
    /** One incident with its newest `limit` timeline entries, oldest first, and the number of entries in all. */
    async get(id: string, limit = TIMELINE_DEFAULT) {
      const row = await db.get<IncidentRow>(`SELECT ${COLS} FROM rules_incidents WHERE id = ?`, [id])
      if (!row) throw new NotFound(`incident '${id}' not found`)
      const total = await db.get<{ n: number }>(
        'SELECT COUNT(*) AS n FROM rules_incident_events WHERE incident_id = ?',
        [id],
      )
      const events = await db.all<{ at: number; kind: string; detail: string }>(
        'SELECT at, kind, detail FROM rules_incident_events WHERE incident_id = ? ORDER BY at DESC, id DESC LIMIT ?',
        [id, limit],
      )
      events.reverse()
      return {
        ...toIncident(row),
        timeline: events.map((e) => ({ at: iso(e.at)!, kind: e.kind, detail: fromJson(e.detail, {}) })),
        timeline_total: Number(total?.n ?? 0),
      }
    },
    /**
     * MTTA and MTTR over incidents opened since `since`: means and medians in seconds. Only the
     * three times are read (every column, titles of 10 KB included, had been read for each).
     */
    async stats(since: number) {
      const rows = await db.all<Pick<IncidentRow, 'opened_at' | 'acked_at' | 'resolved_at'>>(
        'SELECT opened_at, acked_at, resolved_at FROM rules_incidents WHERE opened_at >= ?',
        [since],
      )
      const secs = (xs: number[]) => {
        if (!xs.length) return null
        const s = [...xs].sort((a, b) => a - b)
        const mid = s.length >> 1
        const median = s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2
        return {
          count: s.length,
          mean_s: s.reduce((a, b) => a + b, 0) / s.length / 1000,
          median_s: median / 1000,
        }
      }
      const n = (st: IncidentStatus) =>
        rows.filter((r) =>
          st === 'resolved'
            ? r.resolved_at !== null
            : st === 'acked'
              ? r.resolved_at === null && r.acked_at !== null
              : r.resolved_at === null && r.acked_at === null,
        ).length
      return {
        since: iso(since)!,
        total: rows.length,
        open: n('open'),
        acked: n('acked'),
        resolved: n('resolved'),
        mtta: secs(
          rows.filter((r) => r.acked_at !== null).map((r) => Number(r.acked_at) - Number(r.opened_at)),
        ),
        mttr: secs(
          rows.filter((r) => r.resolved_at !== null).map((r) => Number(r.resolved_at) - Number(r.opened_at)),
        ),
      }
    },
  }
}
export type IncidentStore = ReturnType<typeof incidentStore>

import { type Db, fromJson, iso, newId } from '../../core/db'
import { cut } from '../../core/event-bounds'
import type { AuditEntry } from '../../core/events'

/** The most characters kept of an entry's actor name, target and address. */
const TEXT_MAX = 512

interface Row {
  id: string
  at: number | string
  actor_kind: string
  actor_id: string | null
  actor_name: string | null
  action: string
  target: string | null
  ip: string | null
  ok: number | string
  details: string | null
}

export interface AuditQuery {
  page: number
  size: number
  actor?: string
  action?: string
  target?: string
  ip?: string
  ok?: boolean
  from?: number
  to?: number
}

/**
 * Masks, by name, every field of `details` the `sensitive_fields` setting lists (a key containing
 * one of them, any case): the second line of defence behind producers that mask by schema. As
 * `set` alone: what is masked by name only (a user's password, a PIN) is no configuration key
 * whose last 4 characters tell two apart, and the last 4 of an admin's new password were readable
 * by every operator (sixteenth session's audit).
 */
export function maskByName(value: unknown, names: readonly string[]): unknown {
  if (Array.isArray(value)) return value.map((v) => maskByName(v, names))
  if (!value || typeof value !== 'object') return value
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => {
      const key = k.toLowerCase()
      const secret = names.some((n) => key.includes(n.toLowerCase()))
      // An already masked value ('set:abcd') is kept as it is.
      if (secret && typeof v === 'string' && !/^set(:.{4})?$/.test(v) && v !== '') return [k, 'set']
      if (secret && v !== null && typeof v === 'object') return [k, 'set']
      return [k, maskByName(v, names)]
    }),
  )
}

export function auditStore(db: Db, sensitive: () => readonly string[]) {
  const toEntry = (r: Row) => ({
    id: r.id,
    at: iso(Number(r.at))!,
    actor: { kind: r.actor_kind, id: r.actor_id ?? undefined, name: r.actor_name ?? undefined },
    action: r.action,
    target: r.target ?? undefined,
    ip: r.ip ?? undefined,
    ok: Number(r.ok) === 1,
    details: r.details ? fromJson<Record<string, unknown>>(r.details, {}) : undefined,
  })

  /**
   * A caller's text as it can be kept on every engine, at most `TEXT_MAX` characters (a name,
   * an address, a target: a 9 MB login name was kept whole, twice): a NUL (U+0000), which PostgreSQL's text
   * refuses, shown as U+FFFD. An entry about a request carrying one (a login name, a path) is
   * the entry most worth keeping; it was dropped ("audit entry not stored").
   */
  const text = (v: string | undefined) =>
    v === undefined ? null : cut(v, TEXT_MAX).replaceAll('\0', '\uFFFD')

  return {
    async record(e: AuditEntry): Promise<void> {
      const details = e.details ? maskByName(e.details, sensitive()) : undefined
      await db.run(
        'INSERT INTO audit_log (id, at, actor_kind, actor_id, actor_name, action, target, ip, ok, details) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
        [
          newId(),
          e.at ?? Date.now(),
          e.actor_kind,
          text(e.actor_id),
          text(e.actor_name),
          e.action,
          text(e.target),
          text(e.ip),
          e.ok === false ? 0 : 1,
          details ? JSON.stringify(details) : null,
        ],
      )
    },

    async list(q: AuditQuery) {
      const where = `(CAST(? AS TEXT) IS NULL OR actor_name = ? OR actor_id = ?)
        AND (CAST(? AS TEXT) IS NULL OR action = ? OR action LIKE ?)
        AND (CAST(? AS TEXT) IS NULL OR target = ?)
        AND (CAST(? AS TEXT) IS NULL OR ip = ?)
        AND (CAST(? AS INTEGER) IS NULL OR ok = ?)
        AND (CAST(? AS BIGINT) IS NULL OR at >= ?)
        AND (CAST(? AS BIGINT) IS NULL OR at < ?)`
      const ok = q.ok === undefined ? null : q.ok ? 1 : 0
      const params = [
        q.actor ?? null,
        q.actor ?? null,
        q.actor ?? null,
        q.action ?? null,
        q.action ?? null,
        // `site` matches every `site.*` action.
        q.action ? `${q.action}.%` : null,
        q.target ?? null,
        q.target ?? null,
        q.ip ?? null,
        q.ip ?? null,
        ok,
        ok,
        q.from ?? null,
        q.from ?? null,
        q.to ?? null,
        q.to ?? null,
      ]
      const total = Number(
        (await db.get<{ n: number | string }>(`SELECT COUNT(*) AS n FROM audit_log WHERE ${where}`, params))
          ?.n ?? 0,
      )
      const rows = await db.all<Row>(
        `SELECT id, at, actor_kind, actor_id, actor_name, action, target, ip, ok, details FROM audit_log
         WHERE ${where} ORDER BY at DESC, id DESC LIMIT ? OFFSET ?`,
        [...params, q.size, (q.page - 1) * q.size],
      )
      return { items: rows.map(toEntry), total, page: q.page, size: q.size }
    },

    async purge(olderThan: number): Promise<number> {
      return db.run('DELETE FROM audit_log WHERE at < ?', [olderThan])
    },
  }
}

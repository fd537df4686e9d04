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

/** A key's words in lower case: `tlsPrivateKey` is tls private key, `X-Api-Key` x api key. */
const wordsOf = (k: string) =>
  k
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter(Boolean)

/**
 * Whether a key is named by one of `names`: it contains the name (any case: `password` names
 * `newPassword`, `api_key` names `x_api_key`), or, for a name of several words, ends with those
 * words however they are joined (`private_key` names `privateKey` and `tls-private-key`, `api_key`
 * names `apiKey`). Only at the end: `apiKeyId` is an id, not a key.
 */
export function namedSensitive(names: readonly string[]): (key: string) => boolean {
  const parts = names.map((n) => ({ text: n.toLowerCase(), words: wordsOf(n) }))
  return (key) => {
    const lower = key.toLowerCase()
    let words: string[] | undefined
    return parts.some((n) => {
      if (lower.includes(n.text)) return true
      if (n.words.length < 2) return false
      words ??= wordsOf(key)
      return words.length >= n.words.length && words.slice(-n.words.length).join(' ') === n.words.join(' ')
    })
  }
}

/**
 * Masks, by name, every field of `details` the `sensitive_fields` setting lists (`namedSensitive`):
 * the second line of defence behind producers that mask by schema. As `set` alone: what is masked
 * by name only (a user's password, a PIN) is no configuration key whose last 4 characters tell two
 * apart, and the last 4 of an admin's new password were readable by every operator (sixteenth
 * session's audit).
 */
export function maskByName(value: unknown, names: readonly string[]): unknown {
  return maskWith(value, namedSensitive(names))
}

function maskWith(value: unknown, secret: (key: string) => boolean): unknown {
  if (Array.isArray(value)) return value.map((v) => maskWith(v, secret))
  if (!value || typeof value !== 'object') return value
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => {
      const hidden = secret(k)
      // An already masked value ('set:abcd') is kept as it is.
      if (hidden && typeof v === 'string' && !/^set(:.{4})?$/.test(v) && v !== '') return [k, 'set']
      if (hidden && v !== null && typeof v === 'object') return [k, 'set']
      return [k, maskWith(v, secret)]
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

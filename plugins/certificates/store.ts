import type { Static } from '@sinclair/typebox'
import { type Db, fromJson, iso, newId } from '../../core/db'
import { atCap } from '../../core/db/room'
import { Conflict, NotFound } from '../../core/http'
import type { Alert, Certificate, CertificateWithPem } from './schema'
import { type CertInfo, type CertStatus, daysLeft } from './x509'

type CertRow = {
  id: string
  domain: string
  port: number
  address: string | null
  source: 'manual' | 'probe'
  pem: string | null
  has_private_key: number
  threshold_days: number
  enabled: number
  status: CertStatus
  subject: string | null
  issuer: string | null
  common_name: string | null
  sans: string
  serial_number: string | null
  fingerprint256: string | null
  algorithm: string | null
  chain_length: number
  valid_from: number | null
  valid_to: number | null
  last_checked: number | null
  error: string | null
  created_at: number
  updated_at: number
}

type AlertRow = {
  id: string
  domain: string
  threshold_days: number
  active: number
  last_triggered_at: number | null
  last_event: string | null
  last_valid_to: number | null
  created_at: number
  updated_at: number
}

export type CertRecord = CertRow
/** A certificate as lists and alert rules read it: every column but the PEM. */
export type CertSummary = Omit<CertRow, 'pem'>
export type AlertRecord = AlertRow

/**
 * What a list reads: every column but `pem` (up to 256 KB a row), which only the reads of one
 * certificate answer. Each viewer's list, each check-all and each rule evaluation had loaded every
 * row's PEM to drop it (1 GB and a 0.5 s stall at 5,000 rows).
 */
const SUMMARY = `id, domain, port, address, source, has_private_key, threshold_days, enabled, status, subject,
  issuer, common_name, sans, serial_number, fingerprint256, algorithm, chain_length, valid_from, valid_to,
  last_checked, error, created_at, updated_at`

/**
 * At most MAX_CERTIFICATES certificates and MAX_ALERTS alert rules (409 for a new one past it),
 * counted under a lock held to the transaction's end so two registrations at once cannot both pass.
 */
export const MAX_CERTIFICATES = 1000
export const MAX_ALERTS = 200
const CERT_LOCK = { pg: 72_410_003, mysql: 'liveops_certificates', waitS: 10 }
const ALERT_LOCK = { pg: 72_410_004, mysql: 'liveops_certificate_alerts', waitS: 10 }
const full = (what: string, max: number) => new Conflict(`at most ${max} ${what}: delete one first`)

const opt = <T>(v: T | null) => (v === null ? undefined : v)

export function certView(r: CertSummary, now = Date.now()): Static<typeof Certificate> {
  return {
    id: r.id,
    domain: r.domain,
    port: Number(r.port),
    address: opt(r.address),
    source: r.source,
    status: r.status,
    subject: opt(r.subject),
    issuer: opt(r.issuer),
    commonName: opt(r.common_name),
    sans: fromJson<string[]>(r.sans, []),
    serialNumber: opt(r.serial_number),
    fingerprint256: opt(r.fingerprint256),
    algorithm: opt(r.algorithm),
    chainLength: Number(r.chain_length),
    validFrom: iso(r.valid_from),
    validTo: iso(r.valid_to),
    daysLeft: r.valid_to === null ? undefined : daysLeft(Number(r.valid_to), now),
    thresholdDays: Number(r.threshold_days),
    hasPrivateKey: !!Number(r.has_private_key),
    enabled: !!Number(r.enabled),
    lastChecked: iso(r.last_checked),
    error: opt(r.error),
    createdAt: iso(r.created_at)!,
    updatedAt: iso(r.updated_at)!,
  }
}

export const certWithPem = (r: CertRow): Static<typeof CertificateWithPem> => ({
  ...certView(r),
  certificate: opt(r.pem),
})

export function alertView(r: AlertRow): Static<typeof Alert> {
  return {
    id: r.id,
    domain: r.domain,
    thresholdDays: Number(r.threshold_days),
    active: !!Number(r.active),
    lastTriggeredAt: iso(r.last_triggered_at),
    lastEvent: opt(r.last_event),
    createdAt: iso(r.created_at)!,
    updatedAt: iso(r.updated_at)!,
  }
}

const count = async (db: Db, table: 'certificates' | 'certificate_alerts') =>
  Number((await db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`))?.n ?? 0)

const isUnique = (e: unknown) => /unique|duplicate (key|entry)/i.test(String((e as Error)?.message ?? e))

/** What a check learned: the certificate (when one was read) and the error (when one happened). */
export interface CheckOutcome {
  pem?: string
  info?: CertInfo
  chainLength?: number
  status: CertStatus
  error?: string
}

export function certStore(db: Db) {
  return {
    /** 409 when no certificate can be added: before a registration probes its target. */
    async room(): Promise<void> {
      if ((await count(db, 'certificates')) >= MAX_CERTIFICATES) throw full('certificates', MAX_CERTIFICATES)
    },

    async insert(c: {
      domain: string
      port: number
      address?: string
      source: 'manual' | 'probe'
      hasPrivateKey: boolean
      thresholdDays: number
      enabled: boolean
      outcome: CheckOutcome
    }): Promise<CertRow> {
      const now = Date.now()
      const o = c.outcome
      const i = o.info
      try {
        const row = await db.tx(async (tx) => {
          if (await atCap(tx, CERT_LOCK, 'certificates', MAX_CERTIFICATES))
            throw full('certificates', MAX_CERTIFICATES)
          return tx.get<CertRow>(
            `INSERT INTO certificates (id, domain, port, address, source, pem, has_private_key, threshold_days,
             enabled, status, subject, issuer, common_name, sans, serial_number, fingerprint256, algorithm,
             chain_length, valid_from, valid_to, last_checked, error, created_at, updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *`,
            [
              newId(),
              c.domain,
              c.port,
              c.address ?? null,
              c.source,
              o.pem ?? null,
              c.hasPrivateKey ? 1 : 0,
              c.thresholdDays,
              c.enabled ? 1 : 0,
              o.status,
              i?.subject ?? null,
              i?.issuer ?? null,
              i?.commonName ?? null,
              JSON.stringify(i?.sans ?? []),
              i?.serialNumber ?? null,
              i?.fingerprint256 ?? null,
              i?.algorithm ?? null,
              o.chainLength ?? 0,
              i?.validFrom ?? null,
              i?.validTo ?? null,
              now,
              o.error ?? null,
              now,
              now,
            ],
          )
        })
        return row!
      } catch (e) {
        if (isUnique(e)) throw new Conflict(`certificate for ${c.domain}:${c.port} already registered`)
        throw e
      }
    },

    /** Records a check. A failed probe keeps the certificate read before (its expiry still holds). */
    async recordCheck(id: string, o: CheckOutcome): Promise<CertRow> {
      const now = Date.now()
      const i = o.info
      const row = i
        ? await db.get<CertRow>(
            `UPDATE certificates SET pem = ?, status = ?, subject = ?, issuer = ?, common_name = ?, sans = ?,
               serial_number = ?, fingerprint256 = ?, algorithm = ?, chain_length = ?, valid_from = ?, valid_to = ?,
               last_checked = ?, error = ?, updated_at = ? WHERE id = ? RETURNING *`,
            [
              o.pem ?? null,
              o.status,
              i.subject,
              i.issuer,
              i.commonName ?? null,
              JSON.stringify(i.sans),
              i.serialNumber,
              i.fingerprint256,
              i.algorithm,
              o.chainLength ?? 0,
              i.validFrom,
              i.validTo,
              now,
              o.error ?? null,
              now,
              id,
            ],
          )
        : await db.get<CertRow>(
            'UPDATE certificates SET status = ?, last_checked = ?, error = ?, updated_at = ? WHERE id = ? RETURNING *',
            [o.status, now, o.error ?? null, now, id],
          )
      if (!row) throw new NotFound(`certificate ${id} not found`)
      return row
    },

    async get(id: string): Promise<CertRow> {
      const row = await db.get<CertRow>('SELECT * FROM certificates WHERE id = ?', [id])
      if (!row) throw new NotFound(`certificate ${id} not found`)
      return row
    },

    list(f: { status?: string; domain?: string; enabledOnly?: boolean } = {}): Promise<CertSummary[]> {
      return db.all<CertSummary>(
        `SELECT ${SUMMARY} FROM certificates
         WHERE (CAST(? AS TEXT) IS NULL OR status = ?) AND (CAST(? AS TEXT) IS NULL OR domain = ?)
           AND (? = 0 OR enabled = 1)
         ORDER BY domain, port`,
        [f.status ?? null, f.status ?? null, f.domain ?? null, f.domain ?? null, f.enabledOnly ? 1 : 0],
      )
    },

    /** Certificates not yet expired whose expiry falls before `until`, soonest first. */
    expiringBefore(now: number, until: number): Promise<CertSummary[]> {
      return db.all<CertSummary>(
        `SELECT ${SUMMARY} FROM certificates WHERE valid_to > ? AND valid_to <= ? ORDER BY valid_to, domain`,
        [now, until],
      )
    },

    withStatus(status: CertStatus): Promise<CertSummary[]> {
      return db.all<CertSummary>(
        `SELECT ${SUMMARY} FROM certificates WHERE status = ? ORDER BY valid_to, domain`,
        [status],
      )
    },

    async remove(id: string): Promise<void> {
      if ((await db.run('DELETE FROM certificates WHERE id = ?', [id])) === 0)
        throw new NotFound(`certificate ${id} not found`)
    },

    async counts(): Promise<Record<CertStatus, number>> {
      const rows = await db.all<{ status: CertStatus; n: number }>(
        'SELECT status, COUNT(*) AS n FROM certificates GROUP BY status',
      )
      const out = { active: 0, expiring: 0, expired: 0, unknown: 0 }
      for (const r of rows) out[r.status] = Number(r.n)
      return out
    },

    /** The soonest expiry of each domain, for the expiry gauge. */
    expiryByDomain(): Promise<Array<{ domain: string; valid_to: number }>> {
      return db.all(
        'SELECT domain, MIN(valid_to) AS valid_to FROM certificates WHERE valid_to IS NOT NULL GROUP BY domain',
      )
    },

    // --- alert rules (table certificate_alerts)

    async insertAlert(a: { domain: string; thresholdDays: number; active: boolean }): Promise<AlertRow> {
      const now = Date.now()
      const row = await db.tx(async (tx) => {
        if (await atCap(tx, ALERT_LOCK, 'certificate_alerts', MAX_ALERTS))
          throw full('certificate alert rules', MAX_ALERTS)
        return tx.get<AlertRow>(
          `INSERT INTO certificate_alerts (id, domain, threshold_days, active, created_at, updated_at)
           VALUES (?, ?, ?, ?, ?, ?) RETURNING *`,
          [newId(), a.domain, a.thresholdDays, a.active ? 1 : 0, now, now],
        )
      })
      return row!
    },

    async getAlert(id: string): Promise<AlertRow> {
      const row = await db.get<AlertRow>('SELECT * FROM certificate_alerts WHERE id = ?', [id])
      if (!row) throw new NotFound(`certificate alert ${id} not found`)
      return row
    },

    listAlerts(f: { domain?: string; activeOnly?: boolean } = {}): Promise<AlertRow[]> {
      return db.all<AlertRow>(
        `SELECT * FROM certificate_alerts WHERE (CAST(? AS TEXT) IS NULL OR domain = ?) AND (? = 0 OR active = 1)
         ORDER BY domain, threshold_days, id`,
        [f.domain ?? null, f.domain ?? null, f.activeOnly ? 1 : 0],
      )
    },

    async updateAlert(id: string, p: { thresholdDays?: number; active?: boolean }): Promise<AlertRow> {
      const row = await db.get<AlertRow>(
        `UPDATE certificate_alerts SET threshold_days = COALESCE(?, threshold_days), active = COALESCE(?, active),
           updated_at = ? WHERE id = ? RETURNING *`,
        [p.thresholdDays ?? null, p.active === undefined ? null : p.active ? 1 : 0, Date.now(), id],
      )
      if (!row) throw new NotFound(`certificate alert ${id} not found`)
      return row
    },

    async removeAlert(id: string): Promise<void> {
      if ((await db.run('DELETE FROM certificate_alerts WHERE id = ?', [id])) === 0)
        throw new NotFound(`certificate alert ${id} not found`)
    },

    /**
     * Claims a rule's trigger: succeeds only when lastTriggeredAt is still what the caller read,
     * so two checks racing (or two instances) raise the event once.
     */
    async claimTrigger(
      id: string,
      seen: number | null,
      at: number,
      event: string,
      validTo: number,
    ): Promise<boolean> {
      const n = await db.run(
        `UPDATE certificate_alerts SET last_triggered_at = ?, last_event = ?, last_valid_to = ?
         WHERE id = ? AND ((CAST(? AS BIGINT) IS NULL AND last_triggered_at IS NULL) OR last_triggered_at = ?)`,
        [at, event, validTo, id, seen, seen],
      )
      return n === 1
    },
  }
}

export type CertStore = ReturnType<typeof certStore>

import type { Bus } from '../../core/bus'
import type { CertificateEvent } from '../../core/events'
import type { Logger } from '../../core/log'
import { type Outbound, outboundFailure } from '../../core/outbound'
import { SingleFlight } from '../../core/single-flight'
import {
  type AlertRecord,
  type CertRecord,
  type CertStore,
  type CertSummary,
  type CheckOutcome,
  certView,
} from './store'
import { ProbeError, daysLeft, parsePem, probe, statusOf } from './x509'

const DAY_MS = 86_400_000

export interface CheckSettings {
  timeoutMs: number
  concurrency: number
  /** Every probe goes through the outbound policy: probe targets are given through the API. */
  outbound: Outbound
}

/** Runs `fn` over `items` with at most `limit` in flight. */
async function pool<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await fn(items[next++])
  })
  await Promise.all(lanes)
}

/**
 * Spec 3 section 3 checks and the alert rules. A probe-sourced entry is read again from its
 * server on each check (a renewed certificate shows at once); a manual one re-reads its PEM.
 */
export function certService(store: CertStore, bus: Bus, log: Logger, settings: CheckSettings) {
  /** The check-all under way, which a second caller joins. */
  const checking = new SingleFlight<{ checked: number; durationMs: number }>()

  /** What checking one entry finds, without writing it. */
  async function inspect(
    row: Pick<CertRecord, 'source' | 'pem' | 'domain' | 'port' | 'address' | 'threshold_days'>,
  ): Promise<CheckOutcome> {
    const threshold = Number(row.threshold_days)
    if (row.source === 'probe') {
      try {
        const p = await probe(
          settings.outbound,
          row.domain,
          Number(row.port),
          settings.timeoutMs,
          row.address ?? undefined,
        )
        return {
          pem: p.pem,
          info: p.info,
          chainLength: p.chain.length,
          status: statusOf(p.info.validTo, threshold),
        }
      } catch (e) {
        // The certificate read before still says when it expires; the error says why it was not read again.
        return {
          ...fromPem(row.pem ?? undefined, threshold),
          error: e instanceof ProbeError ? e.message : outboundFailure(e),
        }
      }
    }
    return fromPem(row.pem ?? undefined, threshold)
  }

  function fromPem(pem: string | undefined, threshold: number): CheckOutcome {
    if (pem === undefined) return { status: 'unknown', error: 'no certificate' }
    const parsed = parsePem(pem)
    // Text that does not parse is never stored (registration refuses it; an older row keeps its own).
    if (!parsed.ok) return { status: 'unknown', error: parsed.error }
    return {
      pem: parsed.pem,
      info: parsed.info,
      chainLength: parsed.chain.length,
      status: statusOf(parsed.info.validTo, threshold),
    }
  }

  async function checkOne(row: CertRecord): Promise<CertRecord> {
    return store.recordCheck(row.id, await inspect(row))
  }

  /**
   * Fires each active rule of the domains given (all when undefined) at most once per window:
   * `certificate_expiring` once when a certificate (known by its expiry) enters the rule's
   * window, and `certificate_expired` once when it expires. A renewed certificate has another
   * expiry, so its approach alerts again. lastTriggeredAt guards the claim against a racing check.
   */
  async function evaluateAlerts(domains?: Set<string>): Promise<number> {
    const rules = (await store.listAlerts({ activeOnly: true })).filter(
      (r) => !domains || domains.has(r.domain),
    )
    if (!rules.length) return 0
    const soonest = new Map<string, CertSummary>()
    for (const c of await store.list()) {
      if (c.valid_to === null) continue
      const prev = soonest.get(c.domain)
      if (!prev || Number(c.valid_to) < Number(prev.valid_to)) soonest.set(c.domain, c)
    }
    let fired = 0
    const now = Date.now()
    for (const rule of rules) {
      const cert = soonest.get(rule.domain)
      if (cert && (await fire(rule, cert, now))) fired++
    }
    return fired
  }

  async function fire(rule: AlertRecord, cert: CertSummary, now: number): Promise<boolean> {
    const validTo = Number(cert.valid_to)
    const threshold = Number(rule.threshold_days)
    const last = rule.last_triggered_at === null ? null : Number(rule.last_triggered_at)
    const sameCert = rule.last_valid_to !== null && Number(rule.last_valid_to) === validTo
    let event: 'certificate_expired' | 'certificate_expiring'
    if (validTo <= now) {
      if (sameCert && rule.last_event === 'certificate_expired') return false
      event = 'certificate_expired'
    } else if (validTo - now <= threshold * DAY_MS) {
      if (sameCert) return false
      event = 'certificate_expiring'
    } else return false
    if (!(await store.claimTrigger(rule.id, last, now, event, validTo))) return false
    const view = certView(cert, now)
    const payload: CertificateEvent = {
      id: cert.id,
      domain: cert.domain,
      port: Number(cert.port),
      days_left: daysLeft(validTo, now),
      valid_to: view.validTo!,
      issuer: view.issuer,
      subject: view.subject,
      rule_id: rule.id,
      threshold_days: threshold,
    }
    log.info(event, {
      domain: cert.domain,
      port: payload.port,
      days_left: payload.days_left,
      rule_id: rule.id,
    })
    await bus.emit(event, payload)
    return true
  }

  return {
    inspect,
    evaluateAlerts,

    async check(id: string): Promise<CertRecord> {
      const row = await checkOne(await store.get(id))
      await evaluateAlerts(new Set([row.domain]))
      return row
    },

    /**
     * Every enabled entry, `concurrency` at a time; one entry's failure never stops the rest. One
     * run at a time in a process: a caller while one is under way (another request, the schedule)
     * shares its answer (20 at once had each probed every target, 685 sockets held).
     */
    checkAll(): Promise<{ checked: number; durationMs: number }> {
      return checking.run(checkEvery)
    },
  }

  async function checkEvery(): Promise<{ checked: number; durationMs: number }> {
    const t0 = performance.now()
    const rows = await store.list({ enabledOnly: true })
    // Each entry's PEM is read when its turn comes: at most `concurrency` of them held at once.
    await pool(rows, settings.concurrency, async (row) => {
      try {
        await checkOne(await store.get(row.id))
      } catch (e) {
        // Deleted while being checked, or the store refused: the rest still get their check.
        log.warn('certificate check failed', { id: row.id, domain: row.domain, error: String(e) })
      }
    })
    await evaluateAlerts()
    return { checked: rows.length, durationMs: Math.round((performance.now() - t0) * 10) / 10 }
  }
}

export type CertService = ReturnType<typeof certService>

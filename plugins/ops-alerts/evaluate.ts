import type { Bus } from '../../core/bus'
import type { Logger } from '../../core/log'
import type { Metrics } from '../../core/metrics'
import { SingleFlight } from '../../core/single-flight'
import type { Rule } from './schema'
import type { AlertStore } from './store'

/**
 * Series one rule fires for in one evaluation: a rule with no cooldown over a 500-agent metric
 * stored 500 in-app messages every interval. The others wait for a later evaluation (with a cooldown,
 * those fired now step aside).
 */
export const MAX_FIRED = 50
/**
 * Alerts one evaluation raises over all rules: 500 rules of 50 series each had raised 25,000 an
 * evaluation, each to every channel. Past it the series are held back (not claimed: a later
 * evaluation raises them while they hold), counted in svc_ops_alerts_held_back_total, logged, and
 * told in one `alert.fired` (`ops-alerts:held-back`).
 */
export const MAX_FIRED_PER_EVALUATION = 100

export type Fired = { rule_id: string; series: string; value: number }
export type Evaluation = { fired: Fired[]; held_back: number }

const LEVELS = ['info', 'warning', 'error', 'critical'] as const

type Series = { labels: Record<string, string | number>; value: number }

const HOLDS = {
  gt: (v: number, t: number) => v > t,
  gte: (v: number, t: number) => v >= t,
  lt: (v: number, t: number) => v < t,
  lte: (v: number, t: number) => v <= t,
}
const SYMBOL = { gt: '>', gte: '>=', lt: '<', lte: '<=' }

/** A metric's series as read from the JSON metrics: one unlabelled number or labelled values. */
function seriesOf(value: unknown): Series[] {
  if (typeof value === 'number') return [{ labels: {}, value }]
  return Array.isArray(value) ? (value as Series[]) : []
}

const keyOf = (labels: Record<string, string | number>) =>
  Object.keys(labels)
    .sort()
    .map((k) => `${k}=${labels[k]}`)
    .join(',')

/**
 * Ops alert rules (upstream: metric, operator, threshold, forCount, cooldownSeconds, level): each
 * evaluation reads the svc_ metrics as computed at that moment; a series whose condition held for
 * forCount evaluations in a row raises `alert.fired`, at most once per cooldown across instances.
 * Consecutive counts are this instance's; the cooldown is shared through the store.
 */
export class Evaluator {
  private hits = new Map<string, number>()
  /** The evaluation under way: a second caller (the schedule, another POST) shares it. */
  private readonly evaluating = new SingleFlight<Evaluation>()

  constructor(
    private store: AlertStore,
    private metrics: Metrics,
    private bus: Bus,
    private opts: {
      /** The least cooldown in seconds (eval_interval_s): a stored rule's below it counts as it. */
      floorS?: () => number
      /** Series held back by the caps of one evaluation. */
      heldBack?: (n: number) => void
      log?: Logger
    } = {},
  ) {}

  /** Evaluates every rule once; while one evaluation runs, callers share it. */
  run(now = Date.now()): Promise<Evaluation> {
    return this.evaluating.run(() => this.evaluate(now))
  }

  private async evaluate(now: number): Promise<Evaluation> {
    const rules = (await this.store.list()).filter((r) => r.enabled)
    if (!rules.length) return { fired: [], held_back: 0 }
    const json = await this.metrics.json()
    const floorS = this.opts.floorS?.() ?? 0
    const fired: Fired[] = []
    const seen = new Set<string>()
    let held = 0
    let heldLevel = 0
    const heldRules = new Set<string>()
    for (const rule of rules) {
      let firedByRule = 0
      for (const s of seriesOf(json[rule.metric])) {
        if (!Object.entries(rule.labels).every(([k, v]) => String(s.labels[k]) === v)) continue
        const series = keyOf(s.labels)
        const key = `${rule.id}\u0000${series}`
        seen.add(key)
        if (!HOLDS[rule.operator](s.value, rule.threshold)) {
          this.hits.delete(key)
          continue
        }
        const n = (this.hits.get(key) ?? 0) + 1
        this.hits.set(key, n)
        if (n < rule.forCount) continue
        // A rule over every series of a large fleet fires for at most MAX_FIRED of them an
        // evaluation, and all rules together for MAX_FIRED_PER_EVALUATION: the rest are held back
        // before their cooldown is claimed, so a later evaluation raises them.
        if (firedByRule >= MAX_FIRED || fired.length >= MAX_FIRED_PER_EVALUATION) {
          held++
          heldRules.add(rule.id)
          heldLevel = Math.max(heldLevel, LEVELS.indexOf(rule.level))
          continue
        }
        const cooldownS = Math.max(rule.cooldownSeconds, floorS)
        if (!(await this.store.claim(rule.id, series, s.value, now, cooldownS * 1000))) continue
        firedByRule++
        fired.push({ rule_id: rule.id, series, value: s.value })
        await this.fire(rule, series, s, now)
      }
    }
    // Rules deleted or series gone: forget their counts.
    for (const k of this.hits.keys()) if (!seen.has(k)) this.hits.delete(k)
    if (held) await this.heldBack(held, heldRules.size, LEVELS[heldLevel], now)
    return { fired, held_back: held }
  }

  /** One notification for the series the caps held back (they may be within their cooldown too). */
  private async heldBack(n: number, rules: number, level: Rule['level'], now: number) {
    this.opts.heldBack?.(n)
    this.opts.log?.warn('ops alerts held back', {
      held_back: n,
      rules,
      per_rule: MAX_FIRED,
      per_evaluation: MAX_FIRED_PER_EVALUATION,
    })
    await this.bus.emit('alert.fired', {
      alert_id: 'ops-alerts:held-back',
      source: 'ops-alerts',
      level,
      title: 'Ops alerts held back',
      body: `${n} more series of ${rules} rule${rules === 1 ? '' : 's'} met their condition but were not raised: an evaluation raises at most ${MAX_FIRED_PER_EVALUATION} alerts (${MAX_FIRED} a rule). Those out of their cooldown are raised at a later evaluation while they hold; see svc_ops_alerts_held_back_total.`,
      params: {
        held_back: n,
        rules,
        per_rule: MAX_FIRED,
        per_evaluation: MAX_FIRED_PER_EVALUATION,
      },
      at: new Date(now).toISOString(),
    })
  }

  private async fire(rule: Rule, series: string, s: Series, now: number) {
    const where = series ? `{${series}}` : ''
    await this.bus.emit('alert.fired', {
      alert_id: `ops-alerts:${rule.id}${series ? `:${series}` : ''}`,
      source: 'ops-alerts',
      level: rule.level,
      title: rule.name,
      body: `${rule.metric}${where} is ${s.value} (${SYMBOL[rule.operator]} ${rule.threshold}) for ${rule.forCount} evaluation${rule.forCount === 1 ? '' : 's'}`,
      params: {
        rule_id: rule.id,
        metric: rule.metric,
        value: s.value,
        threshold: rule.threshold,
        operator: rule.operator,
        ...Object.fromEntries(Object.entries(s.labels).map(([k, v]) => [k, v])),
      },
      at: new Date(now).toISOString(),
    })
  }
}

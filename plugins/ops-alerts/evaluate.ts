import type { Bus } from '../../core/bus'
import type { Metrics } from '../../core/metrics'
import type { Rule } from './schema'

/**
 * Series one rule fires for in one evaluation: a rule with no cooldown over a 500-agent metric
 * stored 500 in-app messages every interval. The others wait for a later evaluation (with a cooldown,
 * those fired now step aside).
 */
const MAX_FIRED = 50
import type { AlertStore } from './store'

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

  constructor(
    private store: AlertStore,
    private metrics: Metrics,
    private bus: Bus,
  ) {}

  async run(now = Date.now()): Promise<Array<{ rule_id: string; series: string; value: number }>> {
    const rules = (await this.store.list()).filter((r) => r.enabled)
    if (!rules.length) return []
    const json = await this.metrics.json()
    const fired: Array<{ rule_id: string; series: string; value: number }> = []
    const seen = new Set<string>()
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
        // A rule over every series of a large fleet fires for at most MAX_FIRED of them an evaluation.
        if (firedByRule >= MAX_FIRED) continue
        if (!(await this.store.claim(rule.id, series, s.value, now, rule.cooldownSeconds * 1000))) continue
        firedByRule++
        fired.push({ rule_id: rule.id, series, value: s.value })
        await this.fire(rule, series, s, now)
      }
    }
    // Rules deleted or series gone: forget their counts.
    for (const k of this.hits.keys()) if (!seen.has(k)) this.hits.delete(k)
    return fired
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

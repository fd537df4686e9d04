import { Invalid, invalidField } from '../../core/http'
import { type Matcher, compile } from './compile'
import { type IndexField, MatchError, type MatchInput, requiredEquality } from './match'
import { type RuleBody, duration } from './schema'
import type { RuleRecord, SavedRule } from './store'

const HOUR = 3_600_000
const DAY = 24 * HOUR

/** A rule ready to evaluate: every expression compiled, every duration read. */
export interface CompiledRule {
  rule: SavedRule
  seq: number
  match: Matcher
  /** An equality the match requires: the rule is only tried for notifications that have it. */
  index?: { field: IndexField; values: string[] }
  /** Position in evaluation order, and the last evaluation the index offered the rule to. */
  order: number
  tried: number
  steps: { match?: Matcher; channels: string[] }[]
  forMs?: number
  groupBy?: string[]
  groupMs: number
  inhibit?: { source: Matcher; equal: string[]; ttlMs: number }
  escalation?: { ackTimeoutMs: number; to: string[] }
}

const paramName = (f: string) => (f.startsWith('params.') ? f.slice(7) : f)

function compileField(src: string, field: string): Matcher {
  try {
    return compile(src)
  } catch (e) {
    if (e instanceof MatchError)
      throw new Invalid(`${field}: illegal expression: ${e.message}`, {
        field,
        reason: e.message,
        position: e.position,
      })
    throw e
  }
}

/** Checks and compiles a rule body at save time: the 400s of spec 2 "Rule, group and roster behavior". */
export function compileRule(rule: SavedRule, seq = 0): CompiledRule {
  const match = compileField(rule.match, 'body.match')
  if (rule.route && rule.action !== 'route')
    throw invalidField('body.route', `route steps are only valid with action route, not '${rule.action}'`)
  const steps = (rule.route ?? []).map((s, i) => ({
    match: s.match === undefined ? undefined : compileField(s.match, `body.route[${i}].match`),
    channels: s.channels,
  }))
  if (rule.group_interval !== undefined && !rule.group_by)
    throw invalidField('body.group_interval', 'only valid with group_by')
  return {
    rule,
    seq,
    match,
    index: requiredEquality(rule.match),
    order: 0,
    tried: 0,
    steps,
    forMs: rule.for === undefined ? undefined : duration(rule.for, 'body.for', 0, DAY),
    groupBy: rule.group_by?.map(paramName),
    groupMs: duration(rule.group_interval, 'body.group_interval', 5 * 60_000, DAY),
    inhibit: rule.inhibit && {
      source: compileField(rule.inhibit.source, 'body.inhibit.source'),
      equal: (rule.inhibit.equal ?? []).map(paramName),
      ttlMs: duration(rule.inhibit.ttl, 'body.inhibit.ttl', 30 * 60_000, 7 * DAY),
    },
    escalation: rule.escalation && {
      ackTimeoutMs: duration(rule.escalation.ack_timeout, 'body.escalation.ack_timeout', 5 * 60_000, 7 * DAY),
      to: rule.escalation.to,
    },
  }
}

/** Fills what an omitted field means, so the stored rule reads back complete. */
export function normalize(body: RuleBody, id: string): SavedRule {
  return { ...body, id, mode: body.mode ?? 'shadow', action: body.action ?? 'route' }
}

export interface Sample {
  at: string
  type: string
  level: string
  title: string
  channels: string[]
}

/** In-process observation of a shadow rule (spec 2: resets on restart, not persisted). */
class ShadowStats {
  total = 0
  /** Hits per hour, keyed by hours since the epoch; at most a week of them. */
  buckets = new Map<number, number>()
  samples: Sample[] = []
  /** Matches that would have been held back (suppressed, silenced, inhibited): not hits. */
  held: Record<string, number> = {}
  errors = 0

  hit(now: number, s: Sample) {
    this.total++
    const h = Math.floor(now / HOUR)
    this.buckets.set(h, (this.buckets.get(h) ?? 0) + 1)
    if (this.buckets.size > 170) for (const k of this.buckets.keys()) if (k <= h - 168) this.buckets.delete(k)
    this.samples.unshift(s)
    if (this.samples.length > 20) this.samples.length = 20
  }

  view(now: number) {
    const h = Math.floor(now / HOUR)
    let day = 0
    let week = 0
    for (const [k, v] of this.buckets) {
      if (k > h - 24) day += v
      if (k > h - 168) week += v
    }
    return {
      total: this.total,
      last_24h: day,
      last_7d: week,
      ...(this.samples.length ? { samples: this.samples } : {}),
      held: this.held,
      evaluation_errors: this.errors,
    }
  }
}

export interface Outcome {
  rule: CompiledRule
  /** Channel references; undefined lets the static routes decide (allow, or route without steps). */
  channels?: string[]
  held?: { reason: 'suppressed' | 'silenced' | 'inhibited' | 'pending' | 'folded'; detail: string }
  /** Shadow rules that matched before the deciding rule (their hits were counted). */
  shadow: string[]
}

export interface Folded {
  rule: CompiledRule
  key: Record<string, unknown>
  events: MatchInput[]
  channels?: string[]
}

type Fold = { until: number; channels?: string[]; events: MatchInput[]; key: Record<string, unknown> }

/**
 * The rule set of this instance: compiled rules in evaluation order (priority, then write order),
 * the shadow statistics, and the short-lived state of `for`, `group_by` and `inhibit`, which is
 * kept per instance in memory.
 */
export class RuleEngine {
  private rules: CompiledRule[] = []
  /** Rules without a required equality, tried for every notification, in evaluation order. */
  private free: CompiledRule[] = []
  /** Rules by the equality they require: field, then value. */
  private indexed = new Map<IndexField, Map<string, CompiledRule[]>>()
  private inhibitors: CompiledRule[] = []
  /** Rules with `for` that the index may skip: a notification it skips still ends their pending state. */
  private holders: CompiledRule[] = []
  private epoch = 0
  private stats = new Map<string, ShadowStats>()
  private pending = new Map<string, { since: number; last: number }>()
  private folds = new Map<string, Fold>()
  private sources = new Map<string, Map<string, number>>()
  private timer: Timer | undefined

  constructor(
    private opts: {
      silenced: (roster: string, now: number) => boolean
      onFolded: (f: Folded) => void
    },
  ) {}

  /** Compiled once per record object: saving one rule among 500 recompiles only that one. */
  private compiled = new WeakMap<RuleRecord, CompiledRule>()

  load(records: RuleRecord[]) {
    const compiled: CompiledRule[] = []
    for (const r of records) {
      let c = this.compiled.get(r)
      if (!c) {
        try {
          c = compileRule(r.rule, r.seq)
          this.compiled.set(r, c)
        } catch {
          // Saved rules compiled when saved; a rule that no longer does is left out, not fatal.
          continue
        }
      }
      compiled.push(c)
    }
    compiled.sort((a, b) => (b.rule.priority ?? 0) - (a.rule.priority ?? 0) || a.seq - b.seq)
    this.rules = compiled
    this.free = []
    this.indexed = new Map()
    compiled.forEach((c, i) => {
      c.order = i
      if (c.rule.mode === 'off') return
      if (!c.index) return void this.free.push(c)
      const byValue = this.indexed.get(c.index.field) ?? new Map<string, CompiledRule[]>()
      this.indexed.set(c.index.field, byValue)
      for (const v of c.index.values) byValue.set(v, [...(byValue.get(v) ?? []), c])
    })
    this.inhibitors = compiled.filter((c) => c.inhibit && c.rule.mode !== 'off')
    this.holders = compiled.filter((c) => c.forMs !== undefined && c.index && c.rule.mode !== 'off')
    const ids = new Set(compiled.map((c) => c.rule.id))
    for (const id of this.stats.keys()) if (!ids.has(id)) this.stats.delete(id)
  }

  /** The rules a notification can match, in evaluation order: the free ones and those its fields select. */
  private candidates(n: MatchInput): CompiledRule[] {
    let out: CompiledRule[] | undefined
    let lists = 0
    for (const [field, byValue] of this.indexed) {
      const v = field.startsWith('params.')
        ? Object.hasOwn(n.params, field.slice(7))
          ? n.params[field.slice(7)]
          : undefined
        : n[field as 'type']
      if (typeof v !== 'string') continue
      const hit = byValue.get(v)
      if (!hit) continue
      lists++
      out = out ? out.concat(hit) : hit
    }
    if (!out) return this.free
    // One list is already in order; only a merge needs sorting.
    if (lists === 1 && !this.free.length) return out
    return (this.free.length ? this.free.concat(out) : out).sort((a, b) => a.order - b.order)
  }

  list(): CompiledRule[] {
    return this.rules
  }

  shadowHits(id: string): number {
    return this.stats.get(id)?.total ?? 0
  }

  shadowStats(id: string, now = Date.now()) {
    return (this.stats.get(id) ?? new ShadowStats()).view(now)
  }

  private stat(id: string) {
    const s = this.stats.get(id) ?? new ShadowStats()
    this.stats.set(id, s)
    return s
  }

  private keyOf(names: string[], n: MatchInput): string {
    return JSON.stringify(names.map((k) => (Object.hasOwn(n.params, k) ? n.params[k] : null)))
  }

  private routeOf(c: CompiledRule, n: MatchInput): string[] | undefined {
    for (const s of c.steps) {
      try {
        if (!s.match || s.match(n)) return s.channels
      } catch {
        // A step that fails to evaluate is skipped like a rule.
      }
    }
    return undefined
  }

  private inhibited(c: CompiledRule, n: MatchInput, now: number): boolean {
    if (!c.inhibit) return false
    const seen = this.sources.get(c.rule.id)?.get(this.keyOf(c.inhibit.equal, n))
    return seen !== undefined && now - seen <= c.inhibit.ttlMs
  }

  /** Held reasons that do not depend on time windows: silence, suppression, inhibition. */
  private blocked(c: CompiledRule, n: MatchInput, now: number): Outcome['held'] {
    const roster = c.rule.silence?.roster
    if (roster && this.opts.silenced(roster, now))
      return { reason: 'silenced', detail: `roster '${roster}' has a period covering now` }
    if (c.rule.action === 'suppress')
      return { reason: 'suppressed', detail: `rule '${c.rule.id}' suppresses` }
    if (this.inhibited(c, n, now))
      return {
        reason: 'inhibited',
        detail: 'a notification matching the inhibit source was seen within its ttl',
      }
    return undefined
  }

  /**
   * The first active rule that matches decides; shadow rules that match before it count a hit
   * (or a held match) and evaluation goes on. A rule whose expression fails is skipped.
   * A dry run changes no state.
   */
  evaluate(n: MatchInput, dryRun: boolean, now = Date.now()): { outcome?: Outcome; shadow: string[] } {
    const shadow: string[] = []
    let decided: Outcome | undefined
    const epoch = ++this.epoch
    const candidates = this.candidates(n)
    if (this.holders.length) for (const c of candidates) c.tried = epoch
    for (const c of candidates) {
      let m: boolean
      try {
        m = c.match(n)
      } catch {
        if (!dryRun) this.stat(c.rule.id).errors++
        continue
      }
      if (c.forMs !== undefined && !m && !dryRun) this.pending.delete(`${c.rule.id}\u0000${this.forKey(n)}`)
      if (!m) continue
      if (c.rule.mode === 'shadow') {
        shadow.push(c.rule.id)
        if (dryRun) continue
        const held = this.blocked(c, n, now)
        const st = this.stat(c.rule.id)
        if (held) st.held[held.reason] = (st.held[held.reason] ?? 0) + 1
        else
          st.hit(now, {
            at: new Date(now).toISOString(),
            type: n.type,
            level: n.level,
            title: n.title,
            channels: this.routeOf(c, n) ?? [],
          })
        continue
      }
      decided = this.decide(c, n, dryRun, now, shadow)
      break
    }
    if (!dryRun) {
      for (const c of this.holders)
        if (c.tried !== epoch) this.pending.delete(`${c.rule.id}\u0000${this.forKey(n)}`)
      this.observeSources(n, now)
    }
    return { outcome: decided, shadow }
  }

  private forKey(n: MatchInput): string {
    const a = Object.hasOwn(n.params, 'alert_id') ? n.params.alert_id : undefined
    return typeof a === 'string' || typeof a === 'number' ? `a:${a}` : `t:${n.type}`
  }

  private decide(c: CompiledRule, n: MatchInput, dryRun: boolean, now: number, shadow: string[]): Outcome {
    const held = this.blocked(c, n, now)
    if (held) return { rule: c, held, shadow }
    if (c.forMs !== undefined) {
      const k = `${c.rule.id}\u0000${this.forKey(n)}`
      const p = this.pending.get(k)
      const since = p && now - p.last <= c.forMs ? p.since : now
      if (!dryRun) this.pending.set(k, { since, last: now })
      if (now - since < c.forMs)
        return {
          rule: c,
          held: {
            reason: 'pending',
            detail: `match must hold for ${c.rule.for}; held for ${now - since} ms`,
          },
          shadow,
        }
    }
    const channels = c.rule.action === 'route' ? this.routeOf(c, n) : undefined
    if (c.groupBy) {
      const key = this.keyOf(c.groupBy, n)
      const k = `${c.rule.id}\u0000${key}`
      const f = this.folds.get(k)
      if (f && now < f.until) {
        if (!dryRun) f.events.push(n)
        return {
          rule: c,
          held: { reason: 'folded', detail: `folded into the group summary due in ${f.until - now} ms` },
          shadow,
        }
      }
      if (!dryRun) {
        const values = Object.fromEntries(c.groupBy.map((g) => [g, n.params[g] ?? null]))
        this.folds.set(k, { until: now + c.groupMs, channels, events: [], key: values })
        this.arm()
      }
    }
    return { rule: c, channels, shadow }
  }

  private observeSources(n: MatchInput, now: number) {
    for (const c of this.inhibitors) {
      if (!c.inhibit) continue
      let m = false
      try {
        m = c.inhibit.source(n)
      } catch {
        // as a failing match: not a source
      }
      if (!m) continue
      const seen = this.sources.get(c.rule.id) ?? new Map<string, number>()
      this.sources.set(c.rule.id, seen)
      const key = this.keyOf(c.inhibit.equal, n)
      seen.delete(key)
      seen.set(key, now)
      if (seen.size > 10_000) seen.delete(seen.keys().next().value as string)
    }
  }

  /** Group windows close on a timer: each closing window with folded events becomes one summary. */
  private arm() {
    if (this.timer) return
    const next = Math.min(...[...this.folds.values()].map((f) => f.until))
    // setTimeout takes at most 2^31-1 ms; a later window is re-armed when this one fires.
    this.timer = setTimeout(() => this.flush(), Math.min(2 ** 31 - 1, Math.max(0, next - Date.now())))
  }

  flush(now = Date.now()) {
    this.timer = undefined
    for (const [k, f] of this.folds) {
      if (f.until > now) continue
      this.folds.delete(k)
      const c = this.rules.find((r) => k.startsWith(`${r.rule.id}\u0000`))
      if (c && f.events.length)
        this.opts.onFolded({ rule: c, key: f.key, events: f.events, channels: f.channels })
    }
    if (this.folds.size) this.arm()
  }

  stop() {
    clearTimeout(this.timer)
    this.timer = undefined
  }
}

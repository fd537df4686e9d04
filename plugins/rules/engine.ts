import { Invalid, invalidField } from '../../core/http'
import {
  type ChunkFn,
  type ChunkGuard,
  type Program,
  type RuleCode,
  codeFor,
  cutAfter,
  finish,
  guardHolds,
  program,
  rankOf,
  readSlots,
  ruleCode,
  slotCount,
} from './codegen'
import { type Matcher, compile } from './compile'
import { type IndexField, MatchError, type MatchInput, parse, requiredEquality } from './match'
import { type RuleBody, duration } from './schema'
import type { RuleRecord, SavedRule } from './store'

const HOUR = 3_600_000
const DAY = 24 * HOUR

/** A rule ready to evaluate: every expression compiled, every duration read. */
export interface CompiledRule {
  rule: SavedRule
  /** The rule's id, and whether a chunk of the program ends after it (`cutAfter(id)`, kept). */
  id: string
  cut: boolean
  seq: number
  /** The match as closures: for one-off checks (an open incident's rule still holding). */
  match: Matcher
  /** The match as code for the engine's program, guarded by the index's required equality. */
  code: RuleCode
  /** An equality the match requires: the rule is only tried for notifications that have it. */
  index?: { field: IndexField; values: string[] }
  /** Position in the program (rules not off, in evaluation order), and the last evaluation that matched or failed it. */
  pos: number
  seen: number
  steps: { match?: Matcher; channels: string[] }[]
  forMs?: number
  groupBy?: string[]
  groupMs: number
  inhibit?: { source: Matcher; equal: string[]; ttlMs: number }
  escalation?: { ackTimeoutMs: number; to: string[] }
}

const paramName = (f: string) => (f.startsWith('params.') ? f.slice(7) : f)

function compileField<T = Matcher>(src: string, field: string, how: (src: string) => T): T {
  try {
    return how(src)
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
  // Parsed once: the closures, the index key and the code all come from the one tree.
  const tree = compileField(rule.match, 'body.match', parse)
  const match = compileField(rule.match, 'body.match', () => compile(tree))
  const index = requiredEquality(tree)
  if (rule.route && rule.action !== 'route')
    throw invalidField('body.route', `route steps are only valid with action route, not '${rule.action}'`)
  const steps = (rule.route ?? []).map((s, i) => ({
    match: s.match === undefined ? undefined : compileField(s.match, `body.route[${i}].match`, compile),
    channels: s.channels,
  }))
  if (rule.group_interval !== undefined && !rule.group_by)
    throw invalidField('body.group_interval', 'only valid with group_by')
  return {
    rule,
    id: rule.id,
    cut: cutAfter(rule.id),
    seq,
    match,
    code: compileField(rule.match, 'body.match', () => ruleCode(tree, index)),
    index,
    pos: -1,
    seen: 0,
    steps,
    forMs: rule.for === undefined ? undefined : duration(rule.for, 'body.for', 0, DAY),
    groupBy: rule.group_by?.map(paramName),
    groupMs: duration(rule.group_interval, 'body.group_interval', 5 * 60_000, DAY),
    inhibit: rule.inhibit && {
      source: compileField(rule.inhibit.source, 'body.inhibit.source', compile),
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

const WEEK_HOURS = 168
const SAMPLES = 20

/**
 * In-process observation of a shadow rule (spec 2: resets on restart, not persisted). A hit
 * allocates nothing: hourly counts live in a ring of a week of hours, the newest samples in a
 * ring of reused slots, formatted only when read.
 */
class ShadowStats {
  total = 0
  /** The hour (since the epoch) each ring slot counts, and its count. */
  private hours = new Float64Array(WEEK_HOURS).fill(-1)
  private counts = new Uint32Array(WEEK_HOURS)
  private samples: { at: number; type: string; level: string; title: string; channels: string[] }[] = []
  private next = 0
  /** Matches that would have been held back (suppressed, silenced, inhibited): not hits. */
  held: Record<string, number> = {}
  errors = 0

  hit(now: number, n: MatchInput, channels: string[]) {
    this.total++
    const h = Math.floor(now / HOUR)
    const i = h % WEEK_HOURS
    if (this.hours[i] !== h) {
      this.hours[i] = h
      this.counts[i] = 0
    }
    this.counts[i]++
    const s = this.samples[this.next]
    if (s) {
      s.at = now
      s.type = n.type
      s.level = n.level
      s.title = n.title
      s.channels = channels
    } else this.samples[this.next] = { at: now, type: n.type, level: n.level, title: n.title, channels }
    this.next = (this.next + 1) % SAMPLES
  }

  view(now: number) {
    const h = Math.floor(now / HOUR)
    let day = 0
    let week = 0
    for (let i = 0; i < WEEK_HOURS; i++) {
      const k = this.hours[i]
      if (k > h - 24) day += this.counts[i]
      if (k > h - WEEK_HOURS) week += this.counts[i]
    }
    const samples: Sample[] = []
    for (let j = 1; j <= this.samples.length; j++) {
      const s = this.samples[(this.next - j + SAMPLES) % SAMPLES]
      samples.push({ ...s, at: new Date(s.at).toISOString(), channels: [...s.channels] })
    }
    return {
      total: this.total,
      last_24h: day,
      last_7d: week,
      ...(samples.length ? { samples } : {}),
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

const NO_CHANNELS: string[] = []

type Fold = { until: number; channels?: string[]; events: MatchInput[]; key: Record<string, unknown> }

/** True when the notification has the equality the rule's index requires (the index offers it the rule). */
function offered(c: CompiledRule, n: MatchInput): boolean {
  if (!c.index) return true
  const f = c.index.field
  const v = f.startsWith('params.')
    ? Object.hasOwn(n.params, f.slice(7))
      ? n.params[f.slice(7)]
      : undefined
    : n[f as 'type']
  return typeof v === 'string' && c.index.values.includes(v)
}

const byEvaluationOrder = (a: CompiledRule, b: CompiledRule) =>
  (b.rule.priority ?? 0) - (a.rule.priority ?? 0) || a.seq - b.seq

/**
 * Evaluations a changed chunk serves through its stand-in before its code is generated. A save
 * does not generate code: a burst of saves (an import, a script editing many rules) would
 * otherwise generate and compile a chunk per save, each replaced by the next, and that garbage is
 * what made the saves' slowest outliers (collection pauses, docs/performance.md). A chunk
 * notifications actually reach is generated after this many of them, once.
 */
const HOT = 64

/**
 * What a changed chunk runs from the save until its code is generated: the rules' closures (the
 * reference the generated code is tested against), each behind its index guard as in the code,
 * so it decides exactly as the code will, error for error. `hot` is called once, at its HOT-th call.
 */
const standIn = (rules: readonly CompiledRule[], hot: () => void): ChunkFn => {
  let calls = 0
  return (_t, _l, _r, _i, _b, _p, from, _C, n) => {
    if (++calls === HOT) hot()
    for (let k = from; k < rules.length; k++) {
      const c = rules[k]
      if (!offered(c, n)) continue
      try {
        if (c.match(n)) return k
      } catch {
        return -2 - k
      }
    }
    return -1
  }
}

/**
 * The rule set of this instance: compiled rules in evaluation order (priority, then write order)
 * and their program, the shadow statistics, and the short-lived state of `for`, `group_by` and
 * `inhibit`, which is kept per instance in memory. The rule list and the program are snapshots
 * replaced whole on a change, never edited, so an evaluation reads them without copying.
 */
export class RuleEngine {
  private rules: readonly CompiledRule[] = []
  /** The rules that are not off, in evaluation order: the program's rules, by position. */
  private active: readonly CompiledRule[] = []
  private program: Program = program([])
  /** The params slots of the notification under evaluation (reused: evaluation is synchronous). */
  private view: unknown[] = []
  private inhibitors: readonly CompiledRule[] = []
  /** Rules with `for`: a notification that does not match them ends their pending state. */
  private holders: readonly CompiledRule[] = []
  private epoch = 0
  private stats = new Map<string, ShadowStats>()
  private pending = new Map<string, { since: number; last: number }>()
  private folds = new Map<string, Fold>()
  private sources = new Map<string, Map<string, number>>()
  private timer: Timer | undefined
  /** Generates the code of pending chunks after the turn that made one hot (or a load's). */
  private generating: ReturnType<typeof setImmediate> | undefined
  /** Compiled rules by id with the body they were compiled from: a reload recompiles only what changed. */
  private compiled = new Map<string, { body: string; c: CompiledRule }>()

  constructor(
    private opts: {
      silenced: (roster: string, now: number) => boolean
      onFolded: (f: Folded) => void
    },
  ) {}

  /** Replaces the whole rule set (start, another instance's change): unchanged rules are not compiled again. */
  load(records: RuleRecord[]) {
    const next: CompiledRule[] = []
    const ids = new Set<string>()
    for (const r of records) {
      ids.add(r.rule.id)
      const body = JSON.stringify(r.rule)
      const known = this.compiled.get(r.rule.id)
      if (known && known.body === body && known.c.seq === r.seq) {
        next.push(known.c)
        continue
      }
      try {
        const c = compileRule(r.rule, r.seq)
        this.compiled.set(r.rule.id, { body, c })
        next.push(c)
      } catch {
        // Saved rules compiled when saved; a rule that no longer does is left out, not fatal.
      }
    }
    for (const id of this.compiled.keys()) if (!ids.has(id)) this.compiled.delete(id)
    this.install(next)
  }

  /**
   * Adds or replaces one rule (compiled when it was saved), effective for the next evaluation: the
   * rule moves into its place in the ordered list (no sort of the others), and only the chunk or
   * two it left and joined change; those run the rules' closures until notifications make them
   * hot (HOT), and their code is generated after that evaluation's turn.
   */
  upsert(c: CompiledRule) {
    this.compiled.set(c.id, { body: JSON.stringify(c.rule), c })
    const list = this.rules.slice()
    for (let i = 0; i < list.length; i++)
      if (list[i].id === c.id) {
        list.splice(i, 1)
        break
      }
    let lo = 0
    let hi = list.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (byEvaluationOrder(list[mid], c) <= 0) lo = mid + 1
      else hi = mid
    }
    list.splice(lo, 0, c)
    this.install(list, true)
  }

  remove(id: string) {
    this.compiled.delete(id)
    this.stats.delete(id)
    this.install(
      this.rules.filter((r) => r.id !== id),
      true,
    )
  }

  /** Installs a rule list; `sorted` when it is already in evaluation order, `deferred` to generate changed chunks later. */
  private install(list: CompiledRule[], deferred = false, sorted = deferred) {
    if (!sorted) list.sort(byEvaluationOrder)
    const active: CompiledRule[] = []
    const inhibitors: CompiledRule[] = []
    const holders: CompiledRule[] = []
    for (const c of list) {
      if (c.rule.mode === 'off') {
        c.pos = -1
        continue
      }
      c.pos = active.length
      active.push(c)
      if (c.inhibit) inhibitors.push(c)
      if (c.forMs !== undefined) holders.push(c)
    }
    this.program = program(active, this.program, deferred ? this.standIn : undefined)
    if (this.view.length < slotCount()) this.view = new Array(slotCount())
    this.rules = list
    this.active = active
    this.inhibitors = inhibitors
    this.holders = holders
    if (!deferred) {
      // A load also generates, after its turn, the chunks it takes over from saves still pending.
      this.generateSoon()
      const ids = new Set(list.map((c) => c.id))
      for (const id of this.stats.keys()) if (!ids.has(id)) this.stats.delete(id)
    }
  }

  private standIn = (rules: readonly CompiledRule[]) => standIn(rules, () => this.generateSoon())

  private generateSoon() {
    if (this.generating || !this.program.chunks.some((ch) => ch.pending)) return
    this.generating = setImmediate(() => {
      this.generating = undefined
      this.generate()
    })
  }

  /** Generates the code of every chunk still running its stand-in. */
  generate() {
    for (const ch of this.program.chunks) finish(ch)
  }

  list(): readonly CompiledRule[] {
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
    const { chunks, slots } = this.program
    const active = this.active
    const p = this.view
    readSlots(n.params, slots, p)
    const rank = rankOf(n.level)
    let decidedAt = active.length
    let from = 0
    // Chunks in a row often have the same guard (one object): it is tested once for them.
    let guard: ChunkGuard | undefined
    let holds = false
    for (let ci = 0; ci < chunks.length; ) {
      const ch = chunks[ci]
      if (ch.guard && ch.guard !== guard) {
        guard = ch.guard
        holds = guardHolds(guard, n)
      }
      if (ch.guard && !holds) {
        ci++
        from = ch.base + ch.size
        continue
      }
      const fn = rank >= 0 ? ch.fn : codeFor(ch, rank)
      const k = fn(n.type, n.level, rank, n.title, n.body, p, from - ch.base, ch.consts, n)
      if (k === -1) {
        ci++
        from = ch.base + ch.size
        continue
      }
      const at = ch.base + (k >= 0 ? k : -2 - k)
      const c = active[at]
      c.seen = epoch
      from = at + 1
      if (k < -1) {
        if (!dryRun) this.stat(c.rule.id).errors++
        continue
      }
      if (c.rule.mode === 'shadow') {
        shadow.push(c.rule.id)
        if (dryRun) continue
        const held = this.blocked(c, n, now)
        const st = this.stat(c.rule.id)
        if (held) st.held[held.reason] = (st.held[held.reason] ?? 0) + 1
        else st.hit(now, n, this.routeOf(c, n) ?? NO_CHANNELS)
        continue
      }
      decided = this.decide(c, n, dryRun, now, shadow)
      decidedAt = at
      break
    }
    if (!dryRun) {
      // A `for` rule tried and not matched (or one its index skipped) starts over; one after the
      // deciding rule was not tried, and one that failed to evaluate keeps its state.
      for (const c of this.holders)
        if (c.seen !== epoch && (c.pos < decidedAt || !offered(c, n)))
          this.pending.delete(`${c.rule.id}\u0000${this.forKey(n)}`)
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
    clearImmediate(this.generating)
    this.generating = undefined
  }
}

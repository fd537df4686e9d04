import { rankOf, readSlots, slotCount } from './codegen'
import {
  type Folded,
  type FoldedLine,
  MAX_FOLDED_LINES,
  MAX_STATE,
  bound,
  kept,
  stateKey,
} from './held-state'
import type { MatchInput } from './match'
import { type ChunkGuard, type Program, codeFor, finish, guardHolds, program } from './program'
import { type CompiledRule, byEvaluationOrder, compileRule, offered, standIn } from './rule'
import { ShadowStats } from './shadow'
import type { RuleRecord } from './store'

export interface Outcome {
  rule: CompiledRule
  /** Channel references; undefined lets the static routes decide (allow, or route without steps). */
  channels?: string[]
  held?: { reason: 'suppressed' | 'silenced' | 'inhibited' | 'pending' | 'folded'; detail: string }
  /** Shadow rules that matched before the deciding rule (their hits were counted). */
  shadow: string[]
}

const NO_CHANNELS: string[] = []

type Fold = {
  until: number
  channels?: string[]
  events: FoldedLine[]
  count: number
  key: Record<string, unknown>
}

/**
 * The rule set of this instance: compiled rules in evaluation order (priority, then write order)
 * and their program, the shadow statistics, and the short-lived state of `for`, `group_by` and
 * `inhibit`, which is kept per instance in memory. The rule list and the program are snapshots
 * replaced whole on a change, never edited, so an evaluation reads them without copying.
 */
export type { Folded } from './held-state'

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
    return stateKey(JSON.stringify(names.map((k) => (Object.hasOwn(n.params, k) ? n.params[k] : null))))
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

  /** A `for` rule's pending key, hashed when long as the others are (4 MB alert ids had held 1 GB per 200). */
  private forKey(n: MatchInput): string {
    const a = Object.hasOwn(n.params, 'alert_id') ? n.params.alert_id : undefined
    return stateKey(typeof a === 'string' || typeof a === 'number' ? `a:${a}` : `t:${n.type}`)
  }

  private decide(c: CompiledRule, n: MatchInput, dryRun: boolean, now: number, shadow: string[]): Outcome {
    const held = this.blocked(c, n, now)
    if (held) return { rule: c, held, shadow }
    if (c.forMs !== undefined) {
      const k = `${c.rule.id}\u0000${this.forKey(n)}`
      const p = this.pending.get(k)
      const since = p && now - p.last <= c.forMs ? p.since : now
      if (!dryRun) {
        this.pending.delete(k)
        this.pending.set(k, { since, last: now })
        bound(this.pending)
      }
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
        if (!dryRun) {
          f.count++
          if (f.events.length < MAX_FOLDED_LINES)
            f.events.push({ type: n.type, level: n.level, title: kept(n.title) as string })
        }
        return {
          rule: c,
          held: { reason: 'folded', detail: `folded into the group summary due in ${f.until - now} ms` },
          shadow,
        }
      }
      // Past MAX_STATE open groups a new one is not opened: its notifications go out unfolded.
      if (!dryRun && this.folds.size < MAX_STATE) {
        const values = Object.fromEntries(c.groupBy.map((g) => [g, kept(n.params[g] ?? null)]))
        this.folds.set(k, { until: now + c.groupMs, channels, events: [], count: 0, key: values })
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
      bound(seen)
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
      if (c && f.count)
        this.opts.onFolded({ rule: c, key: f.key, events: f.events, count: f.count, channels: f.channels })
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

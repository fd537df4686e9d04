import { Invalid, invalidField } from '../../core/http'
import { type RuleCode, ruleCode } from './codegen'
import { type Matcher, compile } from './compile'
import { type IndexField, MatchError, type MatchInput, parse, requiredEquality } from './match'
import { type ChunkFn, cutAfter } from './program'
import { type RuleBody, duration } from './schema'
import type { SavedRule } from './store'

const DAY = 24 * 3_600_000

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

/** True when the notification has the equality the rule's index requires (the index offers it the rule). */
export function offered(c: CompiledRule, n: MatchInput): boolean {
  if (!c.index) return true
  const f = c.index.field
  const v = f.startsWith('params.')
    ? Object.hasOwn(n.params, f.slice(7))
      ? n.params[f.slice(7)]
      : undefined
    : n[f as 'type']
  return typeof v === 'string' && c.index.values.includes(v)
}

export const byEvaluationOrder = (a: CompiledRule, b: CompiledRule) =>
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
export const standIn = (rules: readonly CompiledRule[], hot: () => void): ChunkFn => {
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

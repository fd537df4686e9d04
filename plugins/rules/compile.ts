/**
 * The closure compiler of the match language: a parsed expression becomes a tree of small
 * closures. It serves the expressions evaluated once per decision (route steps, inhibit sources,
 * an incident's rule) and is the reference the generated code of `codegen.ts` (the per-event
 * rule match) is tested against.
 */
import {
  LEVEL_RANK,
  MatchError,
  MatchEvalError,
  type MatchInput,
  type Node,
  parse,
  positionOf,
} from './match'

type Value = unknown
type Getter = (n: MatchInput) => Value

function getter(n: Node): Getter {
  switch (n.t) {
    case 'lit': {
      const v = n.v
      return () => v
    }
    case 'list': {
      const v = n.v
      return () => v
    }
    case 'field': {
      const f = n.name
      return (x) => x[f]
    }
    case 'param': {
      const k = n.name
      return (x) => (Object.hasOwn(x.params, k) ? x.params[k] : undefined)
    }
    default: {
      const f = predicate(n)
      return (x) => f(x)
    }
  }
}

export const numeric = (v: unknown): number | undefined =>
  typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' && Number.isFinite(+v) ? +v : undefined

export function equals(a: Value, b: Value): boolean {
  if (a === b) return true
  if (a == null || b == null) return a == null && b == null
  if (typeof a === 'number' || typeof b === 'number') {
    const x = numeric(a)
    const y = numeric(b)
    return x !== undefined && x === y
  }
  return false
}

/** NaN when a side is missing: every ordering with a missing param is false, not an error. */
export function order(a: Value, b: Value, levels: boolean): number {
  if (a == null || b == null) return Number.NaN
  if (levels && typeof a === 'string' && typeof b === 'string' && a in LEVEL_RANK && b in LEVEL_RANK)
    return LEVEL_RANK[a] - LEVEL_RANK[b]
  if (typeof a === 'string' && typeof b === 'string') return a < b ? -1 : a > b ? 1 : 0
  const x = numeric(a)
  const y = numeric(b)
  if (x === undefined || y === undefined) throw new MatchEvalError('operands cannot be ordered')
  return x - y
}

export function contains(hay: Value, needle: Value): boolean {
  if (Array.isArray(hay)) return hay.some((h) => equals(h, needle))
  if (typeof hay === 'string' && typeof needle === 'string') return hay.includes(needle)
  if (hay == null) return false
  throw new MatchEvalError("right side of 'in' must be a list or a string")
}

export const isText = (v: unknown): v is string =>
  typeof v === 'string' && (v.trim() === '' || !Number.isFinite(+v))
const RANKS = new Map(Object.entries(LEVEL_RANK))
type Test = (x: MatchInput) => boolean

/**
 * Shortcuts for the common shapes (a field or param against a literal), with the same results as
 * the general path: a text that does not look like a number equals only the same text, a number
 * equals the same number or a text reading as it, and a level name orders by severity. The code
 * is shared by every rule (closures, not generated functions), so it stays hot with 500 rules.
 */
function specialized(n: Extract<Node, { t: 'cmp' }>): Test | undefined {
  const { l, r, op } = n
  if (l.t !== 'field' && l.t !== 'param') return undefined
  // params[k] of an inherited name (`constructor`) is a function or an object, never a string or
  // a number, so the shapes below that only accept those need no own-property check.
  const read: (x: MatchInput) => unknown =
    l.t === 'field'
      ? (
          (f) => (x: MatchInput) =>
            x[f]
        )(l.name)
      : (
          (k) => (x: MatchInput) =>
            x.params[k]
        )(l.name)
  const ordering = op === '<' || op === '<=' || op === '>' || op === '>='
  if ((op === '==' || op === '!=') && r.t === 'lit' && isText(r.v)) {
    const v = r.v
    const k = l.name
    if (l.t === 'param') return op === '==' ? (x) => x.params[k] === v : (x) => x.params[k] !== v
    const f = l.name as 'type'
    return op === '==' ? (x) => x[f] === v : (x) => x[f] !== v
  }
  if ((op === 'in' || op === 'not in') && r.t === 'list' && r.v.every(isText)) {
    const set = new Set(r.v as string[])
    const k = l.name
    const has: Test =
      l.t === 'param'
        ? (x) => {
            const v = x.params[k]
            return typeof v === 'string' && set.has(v)
          }
        : (x) => set.has(x[k as 'type'])
    return op === 'in' ? has : (x) => !has(x)
  }
  if (r.t === 'lit' && typeof r.v === 'number') {
    const want = r.v
    if (op === '==' || op === '!=') {
      const eq: Test = (x) => {
        const v = read(x)
        return v === want || (typeof v === 'string' && numeric(v) === want)
      }
      return op === '==' ? eq : (x) => !eq(x)
    }
    if (ordering) {
      const general = predicateOf(op, getter(l), getter(r), false)
      const test = rankTest(op, want)
      return (x) => {
        const v = read(x)
        return typeof v === 'number' ? test(v) : general(x)
      }
    }
  }
  if (
    ordering &&
    l.t === 'field' &&
    l.name === 'level' &&
    r.t === 'lit' &&
    typeof r.v === 'string' &&
    RANKS.has(r.v)
  ) {
    const general = predicateOf(op, getter(l), getter(r), true)
    const test = rankTest(op, RANKS.get(r.v)!)
    return (x) => {
      const rank = RANKS.get(x.level)
      return rank === undefined ? general(x) : test(rank)
    }
  }
  return undefined
}

function rankTest(op: string, want: number): (a: number) => boolean {
  if (op === '<') return (a) => a < want
  if (op === '<=') return (a) => a <= want
  if (op === '>') return (a) => a > want
  return (a) => a >= want
}

function predicateOf(op: string, l: Getter, r: Getter, levels: boolean): Test {
  if (op === '<') return (x) => order(l(x), r(x), levels) < 0
  if (op === '<=') return (x) => order(l(x), r(x), levels) <= 0
  if (op === '>') return (x) => order(l(x), r(x), levels) > 0
  return (x) => order(l(x), r(x), levels) >= 0
}

function predicate(n: Node): (x: MatchInput) => boolean {
  switch (n.t) {
    case 'and':
    case 'or': {
      // A chain `a && b && c` becomes one loop over its operands: fewer calls per rule.
      const parts: Node[] = []
      const flatten = (m: Node): void => {
        if (m.t === n.t) {
          flatten(m.l)
          flatten(m.r)
        } else parts.push(m)
      }
      flatten(n)
      const ps = parts.map(predicate)
      if (ps.length === 2) {
        const [a, b] = ps
        return n.t === 'and' ? (x) => a(x) && b(x) : (x) => a(x) || b(x)
      }
      return n.t === 'and'
        ? (x) => {
            for (let i = 0; i < ps.length; i++) if (!ps[i](x)) return false
            return true
          }
        : (x) => {
            for (let i = 0; i < ps.length; i++) if (ps[i](x)) return true
            return false
          }
    }
    case 'not': {
      const e = predicate(n.e)
      return (x) => !e(x)
    }
    case 'cmp': {
      const fast = specialized(n)
      if (fast) return fast
      const l = getter(n.l)
      const r = getter(n.r)
      const levels =
        (n.l.t === 'field' && n.l.name === 'level') || (n.r.t === 'field' && n.r.name === 'level')
      switch (n.op) {
        case '==':
          return (x) => equals(l(x), r(x))
        case '!=':
          return (x) => !equals(l(x), r(x))
        case '<':
          return (x) => order(l(x), r(x), levels) < 0
        case '<=':
          return (x) => order(l(x), r(x), levels) <= 0
        case '>':
          return (x) => order(l(x), r(x), levels) > 0
        case '>=':
          return (x) => order(l(x), r(x), levels) >= 0
        case 'in':
          return (x) => contains(r(x), l(x))
        case 'not in':
          return (x) => !contains(r(x), l(x))
      }
      break
    }
    case 'lit':
      if (typeof n.v === 'boolean') {
        const v = n.v
        return () => v
      }
      break
    case 'field':
    case 'param': {
      // A bare field is true when present and truthy: `params.urgent` reads as operators expect.
      const g = getter(n)
      return (x) => truthy(g(x))
    }
  }
  throw new MatchError('operand is not a condition (compare it, or use true/false)', positionOf(n))
}

export const truthy = (v: unknown): boolean =>
  v !== undefined && v !== null && v !== false && v !== '' && v !== 0

export type Matcher = (n: MatchInput) => boolean

/**
 * Compiles an expression; throws MatchError (with a position) for anything illegal, including an
 * operand of `&&`, `||`, `!` or the whole that cannot be true or false (a bare string or list).
 */
export function compile(src: string | Node): Matcher {
  return predicate(typeof src === 'string' ? parse(src) : src)
}

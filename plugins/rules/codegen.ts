/**
 * The rule set compiled to straight-line code. Each rule's match becomes one boolean expression
 * over the notification's fields, which the engine reads once per notification (not once per
 * rule) into a view: the four fields, the severity rank of the level, and one slot per params key
 * the loaded rules name. A program (program.ts) strings the rules, in evaluation order, into a few generated
 * functions ("chunks") that each return the first rule at or after a position that matches; a
 * rule the index would skip carries its required equality as a guard in front of its match.
 * Measured against the closure tree (one call per node, `Set` lookups): 5-8x less CPU with 500
 * rules, because the JIT sees plain comparisons and no calls.
 *
 * Safe by construction: the parser admits only the fields, literals and operators of the
 * language, and the generated source holds nothing else. Strings enter it as JSON string
 * literals, numbers as finite numeric literals, large lists and sets as constants passed in
 * (`C[rule][i]`), params keys never (a key is a slot number); the helpers (`H`) are the closure
 * compiler's own, so the two agree on every value (the fuzz test checks that they do).
 */
import { contains, equals, isText, numeric, order, truthy } from './compile'
import { type IndexField, LEVEL_RANK, MatchError, type Node, parse, positionOf } from './match'

/** Generated match: type, level, level rank (-1 for an unknown level), title, body, params slots. */
export type Generated = (t: string, l: string, r: number, i: string, b: string, p: unknown[]) => boolean

/**
 * The params keys any compiled expression names, each with its slot in the per-notification view.
 * Process-wide and append-only, so an expression compiled once (at save) keeps its slots for any
 * rule set; it holds names operators wrote, which is small.
 */
const slotOf = new Map<string, number>()
const slotNames: string[] = []

function slot(name: string): number {
  let s = slotOf.get(name)
  if (s === undefined) {
    s = slotNames.length
    slotOf.set(name, s)
    slotNames.push(name)
  }
  return s
}

/** The severity rank of a level name, or -1. */
export const rankOf = (level: string): number =>
  typeof level === 'string' && Object.hasOwn(LEVEL_RANK, level) ? LEVEL_RANK[level] : -1

/**
 * Reads the params slots a rule set uses into `into` (reused across notifications): one own-key
 * read per key per notification, whatever the number of rules that test it.
 */
export function readSlots(params: Record<string, unknown>, slots: Int32Array, into: unknown[]): void {
  for (let i = 0; i < slots.length; i++) {
    const name = slotNames[slots[i]]
    into[slots[i]] = Object.hasOwn(params, name) ? params[name] : undefined
  }
}

/** How many slots exist: the length a view's params array needs. */
export const slotCount = () => slotNames.length

/** Lists up to this long compare inline; longer ones use a Set. */
const INLINE_LIST = 16
/** Stands for the rule's position in its chunk until the chunk is assembled (JSON escapes U+0001). */
export const RULE = '\u0001'
/** Brackets an atom's number in a rule's code (JSON escapes these too). */
const ATOM = '\u0002'
const ATOM_END = '\u0003'
export const ATOM_REF = new RegExp(`${ATOM}(\\d+)${ATOM_END}`, 'g')

export const HELPERS = { eq: equals, ord: order, has: contains, num: numeric, truthy }

const FIELD_VAR = { type: 't', level: 'l', title: 'i', body: 'b' } as const

function literal(v: string | number | boolean | null): string {
  if (typeof v === 'string')
    // JSON is a JS string literal; the two line separators are escaped for older parsers too.
    return JSON.stringify(v)
      .replace(/\u2028/g, '\\u2028')
      .replace(/\u2029/g, '\\u2029')
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new MatchError('number out of range', 0)
    return `(${String(v)})`
  }
  return v === null ? 'null' : v ? 'true' : 'false'
}

const ORDERING = new Set(['<', '<=', '>', '>='])

/** A comparison whose code is simpler when the notification's level is a level name (`known`). */
type Leveled = { code: string; known: string }

class Generator {
  readonly consts: unknown[] = []
  readonly slots = new Set<number>()
  /** Slots compared with a number: the chunk reads each as a number once (`q<slot>`). */
  readonly numbers = new Set<number>()
  /** The comparisons of the expression, referenced from its code by marker. */
  readonly atoms: string[] = []
  /** Atoms that order the level against a level name, by atom number: their code for a known level. */
  readonly levels: Record<number, string> = {}

  private constant(v: unknown): string {
    this.consts.push(v)
    return `C[${RULE}][${this.consts.length - 1}]`
  }

  /** Membership in a list of texts: inline comparisons for a short list (far cheaper than a Set). */
  private member(x: string, values: readonly string[]): string {
    const unique = [...new Set(values)]
    if (!unique.length) return 'false'
    if (unique.length > INLINE_LIST) return `${this.constant(new Set(unique))}.has(${x})`
    return `(${unique.map((v) => `${x} === ${literal(v)}`).join(' || ')})`
  }

  /** The index's required equality as a guard: a rule it would skip is never tried. */
  guard(field: IndexField, values: readonly string[]): string {
    const x = field.startsWith('params.')
      ? this.read({ t: 'param', name: field.slice(7) })!
      : FIELD_VAR[field as 'type']
    // An atom like any comparison: the same test in the match (or in the chunk's other rules) is computed once.
    return this.atom(this.member(x, values), true)
  }

  private read(n: Node): string | undefined {
    if (n.t === 'field') return FIELD_VAR[n.name]
    if (n.t === 'param') {
      // A local of the chunk, read from the view once per call (see chunkFn).
      const s = slot(n.name)
      this.slots.add(s)
      return `p${s}`
    }
    return undefined
  }

  /** An operand as a value; the same shapes, and the same order of errors, as the closure getter. */
  private value(n: Node): string {
    if (n.t === 'lit') return literal(n.v)
    if (n.t === 'list') return this.constant(Object.freeze([...n.v]))
    return this.read(n) ?? `(${this.cond(n, false)})`
  }

  /** The fast forms of `field op literal`, with the results of the general helpers. */
  private special(n: Extract<Node, { t: 'cmp' }>): string | Leveled | undefined {
    const { l, r, op } = n
    const x = this.read(l)
    if (x === undefined) return undefined
    if ((op === '==' || op === '!=') && r.t === 'lit' && isText(r.v)) return `(${x} ${op}= ${literal(r.v)})`
    if ((op === 'in' || op === 'not in') && r.t === 'list' && r.v.every(isText)) {
      // Strict equality with texts: only a string can be a member, as with the closures' typeof.
      const has = this.member(x, r.v as string[])
      return op === 'in' ? has : `!${has}`
    }
    if (r.t === 'lit' && typeof r.v === 'number') {
      const v = literal(r.v)
      if (op === '==' || op === '!=') {
        // A param's numeric reading is a local of the chunk (`q<slot>`, see chunkFn): the same
        // truth as `x === v || (typeof x === "string" && H.num(x) === v)`, one comparison per rule.
        let eq = `(${x} === ${v} || (typeof ${x} === "string" && H.num(${x}) === ${v}))`
        if (l.t === 'param') {
          const s = slot(l.name)
          this.numbers.add(s)
          eq = `(q${s} === ${v})`
        }
        return op === '==' ? eq : `!${eq}`
      }
      if (ORDERING.has(op))
        return `(typeof ${x} === "number" ? ${x} ${op} ${v} : H.ord(${x}, ${v}, false) ${op} 0)`
    }
    if (
      ORDERING.has(op) &&
      l.t === 'field' &&
      l.name === 'level' &&
      r.t === 'lit' &&
      typeof r.v === 'string' &&
      Object.hasOwn(LEVEL_RANK, r.v)
    )
      // For a notification whose level is a level name (rank >= 0) this is a comparison of
      // ranks, which cannot throw: `known`, what a chunk generated for known levels runs.
      return {
        code: `(r >= 0 ? r ${op} ${LEVEL_RANK[r.v]} : H.ord(l, ${literal(r.v)}, true) ${op} 0)`,
        known: `(r ${op} ${LEVEL_RANK[r.v]})`,
      }
    return undefined
  }

  /**
   * A comparison's code, marked as an atom (when `atoms`) so a chunk can compute an atom several
   * of its rules share once per notification.
   */
  private atom(c: string | Leveled, atoms: boolean): string {
    const code = typeof c === 'string' ? c : c.code
    if (!atoms) return code
    if (typeof c !== 'string') this.levels[this.atoms.length] = c.known
    this.atoms.push(code)
    return `${ATOM}${this.atoms.length - 1}${ATOM_END}`
  }

  /** A condition as the operands of its outermost `&&`s, left to right. */
  conjuncts(n: Node): string[] {
    return n.t === 'and' ? [...this.conjuncts(n.l), ...this.conjuncts(n.r)] : [this.cond(n)]
  }

  cond(n: Node, atoms = true): string {
    switch (n.t) {
      case 'and':
      case 'or':
        return `(${this.cond(n.l, atoms)} ${n.t === 'and' ? '&&' : '||'} ${this.cond(n.r, atoms)})`
      case 'not':
        return `!${this.cond(n.e, atoms)}`
      case 'cmp': {
        const fast = this.special(n)
        if (fast) return this.atom(fast, atoms)
        const l = this.value(n.l)
        const r = this.value(n.r)
        const levels =
          (n.l.t === 'field' && n.l.name === 'level') || (n.r.t === 'field' && n.r.name === 'level')
        if (n.op === '==') return this.atom(`H.eq(${l}, ${r})`, atoms)
        if (n.op === '!=') return this.atom(`!H.eq(${l}, ${r})`, atoms)
        if (n.op === 'in') return this.atom(`H.has(${r}, ${l})`, atoms)
        if (n.op === 'not in') return this.atom(`!H.has(${r}, ${l})`, atoms)
        return this.atom(`(H.ord(${l}, ${r}, ${levels}) ${n.op} 0)`, atoms)
      }
      case 'lit':
        if (typeof n.v === 'boolean') return literal(n.v)
        break
      case 'field':
      case 'param':
        return this.atom(`H.truthy(${this.read(n)})`, atoms)
    }
    throw new MatchError('operand is not a condition (compare it, or use true/false)', positionOf(n))
  }
}

/** One rule's match as code: assembled into a chunk, its constants passed at each call. */
export interface RuleCode {
  /** The expression over atom markers, as the operands of its outermost `&&`s (one when there is none). */
  conjuncts: string[]
  atoms: string[]
  consts: unknown[]
  slots: number[]
  /** The slots it compares with a number (each also in `slots`). */
  numbers: number[]
  /** Atoms ordering the level against a level name, by number: their code for a known level. */
  levels: Record<number, string>
}

/**
 * Compiles an expression to code; throws MatchError (with a position) for anything illegal,
 * exactly as the closure compiler does. `guard` is the equality the index requires, tested first.
 */
export function ruleCode(
  src: string | Node,
  guard?: { field: IndexField; values: readonly string[] },
): RuleCode {
  const g = new Generator()
  const match = g.conjuncts(typeof src === 'string' ? parse(src) : src)
  const conjuncts = guard ? [g.guard(guard.field, guard.values), ...match] : match
  return {
    conjuncts,
    atoms: g.atoms,
    consts: g.consts,
    slots: [...g.slots],
    numbers: [...g.numbers],
    levels: g.levels,
  }
}

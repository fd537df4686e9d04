/**
 * The rule set compiled to straight-line code. Each rule's match becomes one boolean expression
 * over the notification's fields, which the engine reads once per notification (not once per
 * rule) into a view: the four fields, the severity rank of the level, and one slot per params key
 * the loaded rules name. A program strings the rules, in evaluation order, into a few generated
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
import {
  type IndexField,
  LEVEL_RANK,
  MatchError,
  MatchEvalError,
  type MatchInput,
  type Node,
  parse,
  positionOf,
} from './match'

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
const RULE = '\u0001'
/** Brackets an atom's number in a rule's code (JSON escapes these too). */
const ATOM = '\u0002'
const ATOM_END = '\u0003'
const ATOM_REF = new RegExp(`${ATOM}(\\d+)${ATOM_END}`, 'g')

const HELPERS = { eq: equals, ord: order, has: contains, num: numeric, truthy }

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

/**
 * A chunk: the first rule at or after local position `from` that matches (its local position),
 * -1 for none, or -2 - k when rule k failed to evaluate (the engine skips it and resumes at k + 1).
 */
export type ChunkFn = (
  t: string,
  l: string,
  r: number,
  i: string,
  b: string,
  p: unknown[],
  from: number,
  C: readonly unknown[][],
  /** The notification itself: generated chunks read the view; a stand-in chunk (see `program`) reads this. */
  n: MatchInput,
) => number

/** What the index requires of every rule of a chunk: a notification with none of it skips the chunk. */
export type ChunkGuard = { field: IndexField; param?: string; values: Set<string> }[]

export interface Chunk {
  /** The code for a notification whose level is a level name (see `anyLevel` for the others). */
  fn: ChunkFn
  /** True when a rule orders the level against a level name: `fn` then holds for known levels only. */
  leveled: boolean
  /** The code for any level, when `leveled`: generated when first needed. */
  general?: ChunkFn
  /**
   * Absent when a rule of the chunk is tried for every notification. Chunks of a program whose
   * guards require the same are given the same guard object (so it is tested once in a row).
   */
  guard?: ChunkGuard
  /** What the guard requires, as a text: equal for equal guards. */
  guardKey?: string
  /** Position of its first rule in the program. */
  base: number
  size: number
  codes: readonly RuleCode[]
  consts: unknown[][]
  /** The params slots its rules read. */
  slots: readonly number[]
  /** True while `fn` is the stand-in the program was given, until `finish` generates the code. */
  pending: boolean
}

export interface Program {
  chunks: Chunk[]
  /** The params slots any of its rules reads. */
  slots: Int32Array
  /** Chunks by their first rule's code: the next program reuses those whose rules did not change. */
  byFirst: Map<RuleCode, Chunk>
}

const MAX_CHUNK = 64

/**
 * A stable cut point (after about one rule in 32), so a save shifts no other chunk's boundaries.
 * Measured with 500 rules all tried: chunks of about 32 evaluate in 4-4.5 us against 6-7 for
 * about 16 (fewer calls, shared atoms computed fewer times); about 64 took 3-4.5 us but 1.6 ms
 * to generate after each save (about 32: 0.8 ms).
 */
export function cutAfter(id: string): boolean {
  let h = 0x811c9dc5
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193)
  return (h & 31) === 31
}

/** The helpers that can throw at evaluation (an ordering or `in` over values that do not allow it); nothing else generated can. */
const THROWING = /H\.(ord|has)\(/

/**
 * A chunk's code. `known`: for notifications whose level is a level name (rank >= 0), where an
 * ordering of the level against a level name compares ranks and cannot throw; otherwise the code
 * for any level.
 */
function chunkFn(codes: readonly RuleCode[], known: boolean): ChunkFn {
  // An atom (a comparison) used twice or more in the chunk is computed at most once per call. One
  // that cannot throw is computed up front into a constant (it is pure, so computing it for a rule
  // that is not reached changes nothing). One that can throw is computed when first needed: a
  // local holds 0 (not yet), 1 (true) or 2 (false); one that throws stays 0, so each rule that
  // needs it fails as it would alone. A rule none of whose atoms can throw needs no try.
  const atomsOf = codes.map((c, k) =>
    c.atoms.map((a, j) => ((known && c.levels[j]) || a).replaceAll(RULE, String(k))),
  )
  const uses = new Map<string, number>()
  for (const atoms of atomsOf) for (const a of atoms) uses.set(a, (uses.get(a) ?? 0) + 1)
  const eager = new Map<string, string>()
  const lazy = new Map<string, string>()
  let head = ''
  for (const [a, n] of uses) {
    if (n < 2) continue
    if (THROWING.test(a)) lazy.set(a, `m${lazy.size}`)
    else {
      const name = `e${eager.size}`
      eager.set(a, name)
      head += `const ${name} = ${a}\n`
    }
  }
  // The params slots the chunk reads, each read from the view once into a local (`p<slot>`),
  // and the numeric reading of those compared with a number (`q<slot>`: the number itself, a
  // text's `H.num`, else the value, which equals no number).
  const slots = [...new Set(codes.flatMap((c) => c.slots))]
  const numbers = [...new Set(codes.flatMap((c) => c.numbers))]
  const reads =
    slots.map((s) => `const p${s} = p[${s}]\n`).join('') +
    numbers.map((s) => `const q${s} = typeof p${s} === "string" ? H.num(p${s}) : p${s}\n`).join('')
  // A rule is its conjuncts in order. Those before the first that can throw are pure and cannot
  // throw, so they may be tested in any order: the rule's own first, then those made only of
  // constants of the chunk (shared by its rules, e.g. `level >= "warning" && !(params.env ==
  // "dev")`) as one constant computed once per call; the rest follow in their order.
  const parts = codes.map((c, k) => {
    const own: string[] = []
    const common: string[] = []
    const rest: string[] = []
    for (const conjunct of c.conjuncts) {
      let throws = false
      let constant = true
      const x = conjunct
        .replace(ATOM_REF, (_, i: string) => {
          const a = atomsOf[k][Number(i)]
          const e = eager.get(a)
          if (e) return e
          constant = false
          const m = lazy.get(a)
          if (m || THROWING.test(a)) throws = true
          return m ? `((${m} === 0 ? (${m} = ${a} ? 1 : 2) : ${m}) === 1)` : a
        })
        .replaceAll(RULE, String(k))
      if (throws || rest.length) rest.push(x)
      else (constant ? common : own).push(x)
    }
    return { own, common: [...new Set(common)].sort().join(' && '), rest }
  })
  // A conjunction of constants two rules or more test is itself a constant of the chunk.
  const users = new Map<string, number>()
  for (const { common } of parts) if (common) users.set(common, (users.get(common) ?? 0) + 1)
  const shared = new Map<string, string>()
  for (const [key, n] of users)
    if (n > 1 && key.includes(' && ')) {
      const g = `g${shared.size}`
      shared.set(key, g)
      head += `const ${g} = ${key}\n`
    }
  let rules = ''
  parts.forEach(({ own, common, rest }, k) => {
    const test = `if (${[...own, ...(common ? [shared.get(common) ?? common] : []), ...rest].join(' && ')}) return ${k}`
    rules += rest.length
      ? `if (from <= ${k}) try { ${test} } catch { return ${-2 - k} }\n`
      : `if (from <= ${k}) ${test}\n`
  })
  const body =
    reads + head + (lazy.size ? `let ${[...lazy.values()].map((m) => `${m} = 0`).join(', ')}\n` : '') + rules
  const make = new Function(
    'H',
    `"use strict"; return function chunk(t, l, r, i, b, p, from, C) {\n${body}return -1 }`,
  )
  return make(HELPERS) as ChunkFn
}

/** True when `chunk` holds exactly the rules at `start` .. `end` - 1 (compared without copying them). */
function holds(chunk: Chunk, rules: readonly ProgramRule[], start: number, end: number): boolean {
  if (chunk.size !== end - start) return false
  for (let j = 0; j < chunk.size; j++) if (chunk.codes[j] !== rules[start + j].code) return false
  return true
}

/** A rule as a program takes it: its id (for the cut points), its code and the index's equality. */
export interface ProgramRule {
  id: string
  code: RuleCode
  index?: { field: IndexField; values: readonly string[] }
  /** `cutAfter(id)`, when the caller keeps it (a compiled rule does: a save then hashes no id). */
  cut?: boolean
}

/** Where each chunk ends (exclusive), in order: the stable cut points, and MAX_CHUNK. */
function ends(rules: readonly ProgramRule[]): number[] {
  const out: number[] = []
  let start = 0
  for (let k = 0; k < rules.length; k++) {
    const r = rules[k]
    if (k + 1 === rules.length || k + 1 - start === MAX_CHUNK || (r.cut ?? cutAfter(r.id))) {
      out.push(k + 1)
      start = k + 1
    }
  }
  return out
}

/**
 * Every chunk is made here, with the same fields in the same order: chunks taken over and chunks
 * made anew are then one shape to the JIT, and the evaluation loop reading them stays optimized.
 */
function chunkOf(c: Omit<Chunk, 'general'>, general?: ChunkFn): Chunk {
  return {
    fn: c.fn,
    leveled: c.leveled,
    general,
    guard: c.guard,
    guardKey: c.guardKey,
    base: c.base,
    size: c.size,
    codes: c.codes,
    consts: c.consts,
    slots: c.slots,
    pending: c.pending,
  }
}

/** A chunk for the rules at `start` .. `end` - 1, its code generated now or (with `standIn`) pending. */
function newChunk<R extends ProgramRule>(
  rules: readonly R[],
  start: number,
  end: number,
  standIn?: (rules: readonly R[]) => ChunkFn,
): Chunk {
  const rs = rules.slice(start, end)
  const codes = rs.map((r) => r.code)
  const guard = chunkGuard(rs)
  return chunkOf({
    fn: standIn ? standIn(rs) : chunkFn(codes, true),
    leveled: codes.some((c) => Object.keys(c.levels).length > 0),
    guard,
    guardKey: guard && guardKey(guard),
    base: start,
    size: codes.length,
    codes,
    consts: codes.map((c) => c.consts),
    slots: [...new Set(codes.flatMap((c) => c.slots))],
    pending: standIn !== undefined,
  })
}

/**
 * Assembles rules (in evaluation order, each with its id for the cut points) into a program.
 * A chunk holding the very same compiled rules as one of `previous` is reused as it is; only the
 * chunks a change touched are generated and compiled anew. With `standIn`, a new chunk is not
 * generated here: it runs the stand-in (which must decide exactly as the code would) and is marked
 * pending until `finish` generates its code, so a caller can answer first and generate after.
 */
export function program<R extends ProgramRule>(
  rules: readonly R[],
  previous?: Program,
  standIn?: (rules: readonly R[]) => ChunkFn,
): Program {
  const byFirst = new Map<RuleCode, Chunk>()
  const guards = new Map<string, ChunkGuard>()
  const chunks: Chunk[] = []
  const slots = new Set<number>()
  let start = 0
  for (const end of ends(rules)) {
    // A save changes a chunk or two: the others are taken over without copying their rules.
    const old = previous?.byFirst.get(rules[start].code)
    let chunk: Chunk
    if (old && holds(old, rules, start, end))
      chunk = old.base === start ? old : chunkOf({ ...old, base: start }, old.general)
    else chunk = newChunk(rules, start, end, standIn)
    if (chunk.guardKey !== undefined) {
      // A taken-over chunk may get an equal guard of this program: the same test either way.
      const same = guards.get(chunk.guardKey)
      if (same) chunk.guard = same
      else if (chunk.guard) guards.set(chunk.guardKey, chunk.guard)
    }
    for (const s of chunk.slots) slots.add(s)
    chunks.push(chunk)
    byFirst.set(rules[start].code, chunk)
    start = end
  }
  return { chunks, slots: Int32Array.from(slots), byFirst }
}

/** Generates a pending chunk's code in place of its stand-in. */
export function finish(chunk: Chunk): void {
  if (!chunk.pending) return
  chunk.fn = chunkFn(chunk.codes, true)
  chunk.general = undefined
  chunk.pending = false
}

/**
 * The code to run for a notification whose level has rank `rank` (-1: not a level name). Levels
 * come validated through notify, so the general code of a chunk that orders the level is only
 * generated if some other caller passes another level; a stand-in decides for any level.
 */
export function codeFor(chunk: Chunk, rank: number): ChunkFn {
  if (rank >= 0 || !chunk.leveled || chunk.pending) return chunk.fn
  chunk.general ??= chunkFn(chunk.codes, false)
  return chunk.general
}

function chunkGuard(rules: readonly ProgramRule[]): ChunkGuard | undefined {
  const guard: ChunkGuard = []
  for (const r of rules) {
    if (!r.index) return undefined
    const field = r.index.field
    let g = guard[0]
    for (let i = 1; g && g.field !== field; i++) g = guard[i]
    if (!g) {
      g = { field, param: field.startsWith('params.') ? field.slice(7) : undefined, values: new Set() }
      guard.push(g)
    }
    for (const v of r.index.values) g.values.add(v)
  }
  return guard
}

function guardKey(guard: ChunkGuard): string {
  return JSON.stringify(guard.map((g) => [g.field, [...g.values].sort()]))
}

/** True when the notification has a value the guard lists (some rule of the chunk may match). */
export function guardHolds(guard: ChunkGuard, n: MatchInput): boolean {
  for (let i = 0; i < guard.length; i++) {
    const g = guard[i]
    const v =
      g.param === undefined
        ? n[g.field as 'type']
        : Object.hasOwn(n.params, g.param)
          ? n.params[g.param]
          : undefined
    if (typeof v === 'string' && g.values.has(v)) return true
  }
  return false
}

/** One expression as a plain matcher (its own program and view): for tests and one-off checks. */
export function generate(src: string): (n: MatchInput) => boolean {
  const prog = program([{ id: 'x', code: ruleCode(src) }])
  const ch = prog.chunks[0]
  return (n) => {
    const p: unknown[] = []
    readSlots(n.params, prog.slots, p)
    const rank = rankOf(n.level)
    const k = codeFor(ch, rank)(n.type, n.level, rank, n.title, n.body, p, 0, ch.consts, n)
    if (k < -1) throw new MatchEvalError('expression failed to evaluate')
    return k === 0
  }
}

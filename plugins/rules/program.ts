import { ATOM_REF, HELPERS, RULE, type RuleCode, rankOf, readSlots, ruleCode } from './codegen'
/**
 * A program: the rule set's codes strung, in evaluation order, into generated chunks (see
 * codegen.ts for one rule's code), each with the index guard that lets a notification skip it.
 */
import { type IndexField, MatchEvalError, type MatchInput } from './match'
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

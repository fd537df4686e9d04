/**
 * The rule match language: a small, safe boolean expression over one notification, compiled once
 * when a rule is saved into a closure that evaluates it.
 *
 *   expr    := or
 *   or      := and ('||' and)*
 *   and     := unary ('&&' unary)*
 *   unary   := '!' unary | compare
 *   compare := operand (('==' | '!=' | '<' | '<=' | '>' | '>=' | 'in' | 'not in') operand)?
 *   operand := field | string | number | true | false | null | list | '(' expr ')'
 *   field   := type | level | title | body | params.<name> | params["<name>"]
 *   list    := '[' (literal (',' literal)*)? ']'
 *
 * No calls, no other identifiers, no property walks beyond one `params` key (looked up as an own
 * property, so `params.__proto__` is just a missing key). At most 2048 characters, 256 nodes and
 * 32 levels of nesting. Ordering `level` against a level name compares severity
 * (debug < info < warning < error < critical), so `level >= "warning"` reads as operators expect.
 */

export const MAX_LENGTH = 2048
export const MAX_NODES = 256
export const MAX_DEPTH = 32

export const LEVEL_RANK: Record<string, number> = { debug: 0, info: 1, warning: 2, error: 3, critical: 4 }

/** What an expression sees of a notification. */
export interface MatchInput {
  type: string
  level: string
  title: string
  body: string
  params: Record<string, unknown>
}

/** An illegal expression: `position` is the 0-based character offset where it went wrong. */
export class MatchError extends Error {
  constructor(
    message: string,
    readonly position: number,
  ) {
    super(`${message} at position ${position}`)
  }
}

/** Thrown at evaluation when operands cannot be compared; the engine skips the rule. */
export class MatchEvalError extends Error {
  constructor(message: string) {
    // Thrown on the notify path, possibly by many rules at once: no stack to capture.
    const limit = Error.stackTraceLimit
    Error.stackTraceLimit = 0
    super(message)
    Error.stackTraceLimit = limit
  }
}

type Tok =
  | { k: 'str'; v: string; at: number }
  | { k: 'num'; v: number; at: number }
  | { k: 'id'; v: string; at: number }
  | { k: 'op'; v: string; at: number }
  | { k: 'end'; at: number }

const OPS = ['==', '!=', '<=', '>=', '&&', '||', '<', '>', '!', '(', ')', '[', ']', ',', '.']

function tokenize(src: string): Tok[] {
  const out: Tok[] = []
  let i = 0
  while (i < src.length) {
    const c = src[i]
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
      i++
      continue
    }
    const at = i
    if (c === '"' || c === "'") {
      let v = ''
      i++
      for (;;) {
        if (i >= src.length) throw new MatchError('unterminated string', at)
        const d = src[i]
        if (d === c) break
        if (d === '\\') {
          const e = src[i + 1]
          const map: Record<string, string> = { n: '\n', t: '\t', r: '\r', '\\': '\\', '"': '"', "'": "'" }
          if (e === undefined || !(e in map)) throw new MatchError('unknown escape in string', i)
          v += map[e]
          i += 2
          continue
        }
        v += d
        i++
      }
      i++
      out.push({ k: 'str', v, at })
      continue
    }
    if ((c >= '0' && c <= '9') || (c === '-' && src[i + 1] >= '0' && src[i + 1] <= '9')) {
      const m = /^-?\d+(\.\d+)?([eE][+-]?\d+)?/.exec(src.slice(i, i + 64))!
      const v = Number(m[0])
      if (!Number.isFinite(v)) throw new MatchError('number out of range', at)
      i += m[0].length
      out.push({ k: 'num', v, at })
      continue
    }
    if (/[A-Za-z_]/.test(c)) {
      const m = /^[A-Za-z_][A-Za-z0-9_-]*/.exec(src.slice(i, i + 80))!
      if (m[0].length > 64) throw new MatchError('name too long', at)
      i += m[0].length
      out.push({ k: 'id', v: m[0], at })
      continue
    }
    const op = OPS.find((o) => src.startsWith(o, i))
    if (!op) throw new MatchError(`unexpected character '${c}'`, at)
    i += op.length
    out.push({ k: 'op', v: op, at })
  }
  out.push({ k: 'end', at: src.length })
  return out
}

export type Node =
  | { t: 'lit'; v: string | number | boolean | null }
  | { t: 'list'; v: (string | number | boolean | null)[] }
  | { t: 'field'; name: 'type' | 'level' | 'title' | 'body' }
  | { t: 'param'; name: string }
  | { t: 'not'; e: Node }
  | { t: 'and' | 'or'; l: Node; r: Node }
  | { t: 'cmp'; op: '==' | '!=' | '<' | '<=' | '>' | '>=' | 'in' | 'not in'; l: Node; r: Node; at: number }

/** Where each node starts in the source, for errors found after parsing. */
const positions = new WeakMap<Node, number>()

/** Where a parsed node starts in its source, for errors found after parsing. */
export const positionOf = (n: Node): number => positions.get(n) ?? 0

const FIELDS = new Set(['type', 'level', 'title', 'body'])
const CMP = new Set(['==', '!=', '<', '<=', '>', '>='])

/** Parses an expression to its tree, or throws a MatchError with the position of the fault. */
export function parse(src: string): Node {
  if (typeof src !== 'string') throw new MatchError('expression must be a string', 0)
  if (src.length > MAX_LENGTH)
    throw new MatchError(`expression longer than ${MAX_LENGTH} characters`, MAX_LENGTH)
  const toks = tokenize(src)
  let p = 0
  let nodes = 0
  const node = <N extends Node>(n: N, at: number): N => {
    if (++nodes > MAX_NODES) throw new MatchError(`expression has more than ${MAX_NODES} nodes`, at)
    positions.set(n, at)
    return n
  }
  const peek = () => toks[p]
  const isOp = (v: string) => {
    const t = toks[p]
    return t.k === 'op' && t.v === v
  }
  const expect = (v: string) => {
    const t = toks[p]
    if (t.k !== 'op' || t.v !== v) throw new MatchError(`expected '${v}'`, t.at)
    p++
  }
  const literal = (): string | number | boolean | null => {
    const t = toks[p++]
    if (t.k === 'str' || t.k === 'num') return t.v
    if (t.k === 'id' && (t.v === 'true' || t.v === 'false')) return t.v === 'true'
    if (t.k === 'id' && t.v === 'null') return null
    throw new MatchError('expected a literal', t.at)
  }

  function operand(depth: number): Node {
    const t = peek()
    if (t.k === 'op' && t.v === '(') {
      if (depth >= MAX_DEPTH) throw new MatchError(`nesting deeper than ${MAX_DEPTH}`, t.at)
      p++
      const e = or(depth + 1)
      expect(')')
      return e
    }
    if (t.k === 'op' && t.v === '[') {
      p++
      const v: (string | number | boolean | null)[] = []
      if (!isOp(']'))
        for (;;) {
          node({ t: 'lit', v: null }, peek().at)
          v.push(literal())
          if (isOp(']')) break
          expect(',')
        }
      p++
      return node({ t: 'list', v }, t.at)
    }
    if (t.k === 'str' || t.k === 'num') {
      p++
      return node({ t: 'lit', v: t.v }, t.at)
    }
    if (t.k === 'id') {
      p++
      if (t.v === 'true' || t.v === 'false') return node({ t: 'lit', v: t.v === 'true' }, t.at)
      if (t.v === 'null') return node({ t: 'lit', v: null }, t.at)
      if (FIELDS.has(t.v)) return node({ t: 'field', name: t.v as 'type' }, t.at)
      if (t.v === 'params') {
        const d = peek()
        if (d.k === 'op' && d.v === '.') {
          p++
          const n = peek()
          if (n.k !== 'id') throw new MatchError('expected a parameter name after params.', n.at)
          p++
          if (isOp('.') || isOp('[')) throw new MatchError('only one level of params is reachable', peek().at)
          return node({ t: 'param', name: n.v }, t.at)
        }
        if (d.k === 'op' && d.v === '[') {
          p++
          const n = peek()
          if (n.k !== 'str') throw new MatchError('expected a quoted parameter name', n.at)
          p++
          expect(']')
          if (isOp('.') || isOp('[')) throw new MatchError('only one level of params is reachable', peek().at)
          return node({ t: 'param', name: n.v }, t.at)
        }
        throw new MatchError('params needs a name: params.<name>', d.at)
      }
      throw new MatchError(`unknown name '${t.v}' (fields: type, level, title, body, params.<name>)`, t.at)
    }
    if (t.k === 'end') throw new MatchError('unexpected end of expression', t.at)
    throw new MatchError(`unexpected '${t.v}'`, t.at)
  }

  function compare(depth: number): Node {
    const l = operand(depth)
    const t = peek()
    let op: string | undefined
    if (t.k === 'op' && CMP.has(t.v)) op = t.v
    else if (t.k === 'id' && t.v === 'in') op = 'in'
    else if (t.k === 'id' && t.v === 'not') {
      const n = toks[p + 1]
      if (n.k !== 'id' || n.v !== 'in') throw new MatchError("expected 'in' after 'not'", n.at)
      p++
      op = 'not in'
    }
    if (!op) return l
    p++
    const r = operand(depth)
    const after = peek()
    if (
      (after.k === 'op' && CMP.has(after.v)) ||
      (after.k === 'id' && (after.v === 'in' || after.v === 'not'))
    )
      throw new MatchError('comparisons do not chain; use && or parentheses', after.at)
    return node({ t: 'cmp', op: op as '==', l, r, at: t.at }, t.at)
  }

  function unary(depth: number): Node {
    const t = peek()
    if (t.k === 'op' && t.v === '!') {
      if (depth >= MAX_DEPTH) throw new MatchError(`nesting deeper than ${MAX_DEPTH}`, t.at)
      p++
      return node({ t: 'not', e: unary(depth + 1) }, t.at)
    }
    return compare(depth)
  }

  function and(depth: number): Node {
    let l = unary(depth)
    while (isOp('&&')) {
      const at = peek().at
      p++
      l = node({ t: 'and', l, r: unary(depth) }, at)
    }
    return l
  }

  function or(depth: number): Node {
    let l = and(depth)
    while (isOp('||')) {
      const at = peek().at
      p++
      l = node({ t: 'or', l, r: and(depth) }, at)
    }
    return l
  }

  const tree = or(0)
  const rest = peek()
  if (rest.k !== 'end') throw new MatchError(`unexpected '${rest.v}'`, rest.at)
  return tree
}

/** What the rule index reads of a notification: a field, or one params key. */
export type IndexField = 'type' | 'level' | 'title' | 'body' | `params.${string}`

const PREFERENCE = (f: IndexField) => (f === 'type' ? 0 : f.startsWith('params.') ? 1 : f === 'level' ? 3 : 2)

const isIndexText = (v: unknown): v is string =>
  typeof v === 'string' && (v.trim() === '' || !Number.isFinite(+v))

/**
 * What the whole expression requires of one field (a top-level `&&` conjunct `field == "text"`
 * or `field in ["a", "b"]`), so the engine can skip the rule for notifications whose field holds
 * none of those texts. Numeric-looking texts are left out: `==` compares them as numbers, which
 * an exact-text index would miss. Fewer values (then `type`, then params) make the better key.
 */
export function requiredEquality(src: string | Node): { field: IndexField; values: string[] } | undefined {
  const found: { field: IndexField; values: string[] }[] = []
  const fieldOf = (f: Node): IndexField | undefined =>
    f.t === 'field' ? f.name : f.t === 'param' ? `params.${f.name}` : undefined
  const walk = (n: Node) => {
    if (n.t === 'and') {
      walk(n.l)
      walk(n.r)
    } else if (n.t === 'cmp' && n.op === '==') {
      for (const [f, v] of [
        [n.l, n.r],
        [n.r, n.l],
      ]) {
        const field = fieldOf(f)
        if (field && v.t === 'lit' && isIndexText(v.v)) found.push({ field, values: [v.v] })
      }
    } else if (
      n.t === 'cmp' &&
      n.op === 'in' &&
      n.r.t === 'list' &&
      n.r.v.length &&
      n.r.v.every(isIndexText)
    ) {
      const field = fieldOf(n.l)
      if (field) found.push({ field, values: [...new Set(n.r.v as string[])] })
    }
  }
  walk(typeof src === 'string' ? parse(src) : src)
  return found.sort(
    (a, b) => a.values.length - b.values.length || PREFERENCE(a.field) - PREFERENCE(b.field),
  )[0]
}

import RandExp from 'randexp'

/*
 * Seeded input generation from the OpenAPI description's JSON Schemas: values a schema accepts,
 * and values it certainly refuses (with the reason, so a 2xx answer to one is a finding).
 */
export type Json = Record<string, unknown>

/** mulberry32: small, fast, and the same sequence for the same seed everywhere. */
export function rng(seed: number) {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1))
  const pick = <T>(xs: readonly T[]): T => xs[int(0, xs.length - 1)]
  return { next, int, pick, chance: (p: number) => next() < p }
}
export type Rng = ReturnType<typeof rng>

export class Generator {
  constructor(
    private components: Record<string, Json>,
    private r: Rng,
    /** Values that hit real resources, by property or parameter name (gameId, environment, ...). */
    private known: Record<string, readonly string[]> = {},
  ) {}

  resolve(s: Json | undefined): Json {
    let cur = s ?? {}
    for (let i = 0; i < 10 && typeof cur.$ref === 'string'; i++)
      cur = this.components[(cur.$ref as string).replace('#/components/schemas/', '')] ?? {}
    return cur
  }

  private string(s: Json, name?: string): string {
    if (name && this.known[name]?.length && this.r.chance(0.7)) return this.r.pick(this.known[name])
    if (typeof s.pattern === 'string') {
      const re = new RandExp(s.pattern)
      re.max = 8
      re.randInt = (lo: number, hi: number) => this.r.int(lo, hi)
      for (let i = 0; i < 5; i++) {
        const v = re.gen()
        const min = (s.minLength as number) ?? 0
        const max = (s.maxLength as number) ?? 64
        if (v.length >= min && v.length <= max) return v
      }
    }
    const min = (s.minLength as number) ?? 0
    const max = Math.min((s.maxLength as number) ?? 24, min + 24)
    const alphabet = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ._-:/éß😀'
    let out = ''
    const n = this.r.int(min, Math.max(min, max))
    for (let i = 0; i < n; i++) out += this.r.pick([...alphabet])
    return out
  }

  private number(s: Json, integer: boolean): number {
    const lo = (s.minimum as number) ?? ((s.exclusiveMinimum as number) ?? -1000) + (integer ? 1 : 0.001)
    const hi = (s.maximum as number) ?? ((s.exclusiveMaximum as number) ?? lo + 2000) - (integer ? 1 : 0.001)
    const v = lo + this.r.next() * Math.max(0, hi - lo)
    return integer ? Math.min(Math.floor(hi), Math.max(Math.ceil(lo), Math.round(v))) : v
  }

  /** A value `schema` accepts (as far as plain JSON Schema goes: business rules may still refuse it). */
  valid(schema: Json | undefined, name?: string, depth = 0): unknown {
    const s = this.resolve(schema)
    if ('const' in s) return s.const
    if (Array.isArray(s.enum)) return this.r.pick(s.enum)
    const branches = (s.anyOf ?? s.oneOf) as Json[] | undefined
    if (branches?.length) return this.valid(this.r.pick(branches), name, depth)
    if (Array.isArray(s.allOf))
      return this.valid(Object.assign({}, ...(s.allOf as Json[]).map((x) => this.resolve(x))), name, depth)
    const type = Array.isArray(s.type) ? this.r.pick(s.type as string[]) : (s.type as string | undefined)
    switch (type) {
      case 'string':
        return this.string(s, name)
      case 'integer':
        return this.number(s, true)
      case 'number':
        return this.number(s, false)
      case 'boolean':
        return this.r.chance(0.5)
      case 'null':
        return null
      case 'array': {
        const min = (s.minItems as number) ?? 0
        const max = Math.min((s.maxItems as number) ?? 3, min + 3)
        const out: unknown[] = []
        const n = depth > 3 ? min : this.r.int(min, Math.max(min, max))
        for (let i = 0; i < n * 3 && out.length < n; i++) {
          const v = this.valid(s.items as Json, undefined, depth + 1)
          if (!s.uniqueItems || !out.some((x) => JSON.stringify(x) === JSON.stringify(v))) out.push(v)
        }
        return out
      }
      case 'object':
      case undefined: {
        if (type === undefined && !s.properties) return this.r.pick(['free', 7, true, { k: 'v' }])
        const out: Json = {}
        const required = (s.required as string[]) ?? []
        for (const [k, p] of Object.entries((s.properties as Record<string, Json>) ?? {}))
          if (required.includes(k) || (depth < 3 && this.r.chance(0.5))) {
            const d = p.description as string | undefined
            // Read-only echoes (GET-modify-PUT) are only valid unchanged: left out here.
            if (!required.includes(k) && d?.startsWith('read-only')) continue
            out[k] = this.valid(p, k, depth + 1)
          }
        if (s.additionalProperties && typeof s.additionalProperties === 'object' && this.r.chance(0.3))
          out[`k${this.r.int(0, 99)}`] = this.valid(s.additionalProperties as Json, undefined, depth + 1)
        return out
      }
    }
    return 'x'
  }

  /**
   * A value `schema` certainly refuses, with why; undefined when this schema refuses nothing we
   * can be sure of (an untyped field).
   */
  invalid(schema: Json | undefined, depth = 0): { value: unknown; why: string } | undefined {
    const s = this.resolve(schema)
    if (s.anyOf || s.oneOf || s.allOf) return undefined
    if (Array.isArray(s.enum)) return { value: '__not_a_member__', why: 'not one of the enum values' }
    const type = s.type as string | undefined
    const wrongType = (): unknown =>
      type === 'string'
        ? this.r.pick([12345, true, [], {}])
        : type === 'integer' || type === 'number'
          ? this.r.pick(['12', 'abc', true, [1]])
          : type === 'boolean'
            ? this.r.pick(['true', 1, 'yes'])
            : type === 'array'
              ? this.r.pick(['abc', { 0: 'a' }, 5])
              : this.r.pick([[1], 'str', 5, null])
    if (!type) return undefined
    if (type !== 'object' || depth > 2 || this.r.chance(0.3))
      return { value: wrongType(), why: `not a ${type}` }
    const props = (s.properties as Record<string, Json>) ?? {}
    const required = (s.required as string[]) ?? []
    const base = this.valid(s, undefined, depth) as Json
    const choices: Array<() => { value: unknown; why: string } | undefined> = []
    if (required.length)
      choices.push(() => {
        const k = this.r.pick(required)
        const { [k]: _, ...rest } = base
        return { value: rest, why: `missing required ${k}` }
      })
    if (s.additionalProperties === false)
      choices.push(() => ({
        value: { ...base, zz_unknown: 1 },
        why: 'a property the schema does not declare',
      }))
    const typed = Object.entries(props).filter(([, p]) => this.invalidable(p))
    if (typed.length)
      choices.push(() => {
        const [k, p] = this.r.pick(typed)
        const bad = this.invalid(p, depth + 1)
        return bad ? { value: { ...base, [k]: bad.value }, why: `${k}: ${bad.why}` } : undefined
      })
    choices.push(() => ({ value: wrongType(), why: 'not an object' }))
    return this.r.pick(choices)()
  }

  private invalidable(p: Json): boolean {
    const s = this.resolve(p)
    return !!(s.type || Array.isArray(s.enum)) && !s.anyOf && !s.oneOf
  }
}

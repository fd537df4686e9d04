import { describe, expect, test } from 'bun:test'
import { ruleCode } from './codegen'
import { compile } from './compile'
import { RuleEngine } from './engine'
import type { MatchInput } from './match'
import { program } from './program'
import { normalize } from './rule'
import type { RuleBody } from './schema'
import type { RuleRecord } from './store'

const T0 = Date.UTC(2031, 2, 4, 10, 0, 0)
const HOUR = 3_600_000

let seed = 11
const rnd = (k: number) => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff
  return seed % k
}
const pick = <T>(xs: readonly T[]): T => xs[rnd(xs.length)]

const TYPES = ['disk', 'cpu', 'db.down', 'db.slow', 'net']
const ENVS = ['prod', 'dev', 'stage']
/** Rule matches: indexed by type or params.env, free, and some that fail at evaluation (bad is an object). */
function randomMatch(): string {
  const extra = pick([
    'level >= "warning"',
    'params.lag > 10',
    'params.lag == 7',
    'params.region in ["eu-1", "us-1"]',
    '!(params.env == "dev")',
    'params.bad > 1',
    'title != "quiet"',
    'params.urgent',
    `params.code in [${Array.from({ length: 18 }, (_, i) => `"c${i}"`).join(', ')}]`,
  ])
  return pick([
    () => `type == "${pick(TYPES)}" && ${extra}`,
    () => `type in ["${pick(TYPES)}", "${pick(TYPES)}"] && ${extra}`,
    () => `params.env == "${pick(ENVS)}" && ${extra}`,
    () => extra,
    () => `${extra} || level == "critical"`,
  ])()
}

const randomRule = (id: string): RuleBody => ({
  id,
  match: randomMatch(),
  mode: pick(['active', 'shadow', 'shadow', 'off'] as const),
  priority: rnd(4),
  route: [{ channels: [id] }],
})

function randomNote(): MatchInput {
  return {
    type: pick(TYPES),
    level: pick(['debug', 'info', 'warning', 'error', 'critical']),
    title: pick(['quiet', 'loud']),
    body: '',
    params: {
      env: pick([...ENVS, undefined]),
      lag: pick([3, 7, 12, '12', 'x']),
      region: pick(['eu-1', 'us-1', 'ap-1']),
      bad: pick([{}, 2, 0]),
      urgent: pick([true, false, 0, 'y']),
      code: pick(['c3', 'c17', 'c30', 5]),
    },
  }
}

/** What the engine should decide, computed the slow, obvious way: closures over the rules in order. */
function reference(records: RuleRecord[], n: MatchInput) {
  const sorted = [...records].sort((a, b) => (b.rule.priority ?? 0) - (a.rule.priority ?? 0) || a.seq - b.seq)
  const shadow: string[] = []
  const errors: string[] = []
  for (const r of sorted) {
    if (r.rule.mode === 'off') continue
    let m: boolean
    try {
      m = compile(r.rule.match)(n)
    } catch {
      errors.push(r.rule.id)
      continue
    }
    if (!m) continue
    if (r.rule.mode === 'shadow') shadow.push(r.rule.id)
    else return { decided: r.rule.id, shadow, errors }
  }
  return { decided: undefined, shadow, errors }
}

const record = (rule: RuleBody, seq: number): RuleRecord => ({
  rule: normalize(rule, rule.id!),
  seq,
  created_at: T0,
  updated_at: T0,
})
const engine = () => new RuleEngine({ silenced: () => false, onFolded: () => undefined })

describe('the generated program', () => {
  test('decides as closures over the rules in order would, on random rule sets, after loads and single saves', () => {
    for (let round = 0; round < 6; round++) {
      let seq = 0
      let records = Array.from({ length: 40 + rnd(120) }, (_, i) => record(randomRule(`r${i}`), ++seq))
      const loaded = engine()
      loaded.load(records)
      const saved = engine()
      for (const r of records) saved.upsert(compileFor(r))
      // Single saves and deletes on top: the incremental path must agree with a fresh load.
      for (let i = 0; i < 15; i++) {
        const victim = records[rnd(records.length)]
        if (rnd(3) === 0) {
          records = records.filter((r) => r !== victim)
          saved.remove(victim.rule.id)
        } else {
          const next = record(randomRule(victim.rule.id), victim.seq)
          records = records.map((r) => (r === victim ? next : r))
          saved.upsert(compileFor(next))
        }
      }
      loaded.load(records)
      const fresh = engine()
      fresh.load(records)
      const errors = new Map<string, number>()
      for (let i = 0; i < 150; i++) {
        const x = randomNote()
        const want = reference(records, x)
        for (const e of [loaded, saved, fresh]) {
          const got = e.evaluate(x, true, T0)
          expect([got.outcome?.rule.rule.id, got.shadow]).toEqual([want.decided, want.shadow])
        }
        // Not a dry run: failures before the deciding rule are counted, the ones after are not tried.
        fresh.evaluate(x, false, T0)
        for (const id of want.errors) errors.set(id, (errors.get(id) ?? 0) + 1)
      }
      for (const r of records)
        expect([r.rule.id, fresh.shadowStats(r.rule.id).evaluation_errors]).toEqual([
          r.rule.id,
          errors.get(r.rule.id) ?? 0,
        ])
    }
  })

  test('a notification whose level is no level name runs the code for any level, deciding as closures would', () => {
    let general = 0
    for (let round = 0; round < 4; round++) {
      const records = Array.from({ length: 60 + rnd(100) }, (_, i) => record(randomRule(`u${i}`), i + 1))
      const e = engine()
      e.load(records)
      const chunks = () =>
        (e as unknown as { program: { chunks: { leveled: boolean; general?: unknown }[] } }).program.chunks
      expect(chunks().some((c) => c.leveled)).toBe(true)
      const errors = new Map<string, number>()
      for (let i = 0; i < 200; i++) {
        // Known levels, and levels the code for known levels cannot take: names out of the ranks,
        // a number text, an empty one, and values that are not texts (an ordering of them throws).
        const level = (['warning', 'critical', 'severe', '3', '', 3, null, {}] as unknown[])[i % 8]
        const x = { ...randomNote(), level } as MatchInput
        const want = reference(records, x)
        const got = e.evaluate(x, false, T0)
        expect([got.outcome?.rule.rule.id, got.shadow]).toEqual([want.decided, want.shadow])
        for (const id of want.errors) errors.set(id, (errors.get(id) ?? 0) + 1)
      }
      // The general code is generated for a chunk that orders the level when such a level reaches it.
      for (const c of chunks()) if (!c.leveled) expect(c.general).toBeUndefined()
      general += chunks().filter((c) => c.general !== undefined).length
      for (const r of records)
        expect([r.rule.id, e.shadowStats(r.rule.id).evaluation_errors]).toEqual([
          r.rule.id,
          errors.get(r.rule.id) ?? 0,
        ])
    }
    expect(general).toBeGreaterThan(0)
  })

  test('chunks a save changed decide through their stand-in exactly as through their generated code', () => {
    for (let round = 0; round < 4; round++) {
      const records = Array.from({ length: 60 + rnd(100) }, (_, i) => record(randomRule(`s${i}`), i + 1))
      const saved = engine()
      for (const r of records) saved.upsert(compileFor(r))
      const chunks = () =>
        (saved as unknown as { program: { chunks: { pending?: boolean }[] } }).program.chunks
      // Nothing yielded since the saves: every chunk still runs its stand-in.
      expect(chunks().every((c) => c.pending)).toBe(true)
      const notes = Array.from({ length: 150 }, randomNote)
      const errors = new Map<string, number>()
      const decisions = (e: RuleEngine) =>
        notes.map((x) => {
          const got = e.evaluate(x, false, T0)
          return [got.outcome?.rule.rule.id, got.shadow]
        })
      const want = notes.map((x) => {
        const r = reference(records, x)
        for (const id of r.errors) errors.set(id, (errors.get(id) ?? 0) + 1)
        return [r.decided, r.shadow]
      })
      expect(decisions(saved)).toEqual(want)
      saved.generate()
      expect(chunks().some((c) => c.pending)).toBe(false)
      expect(decisions(saved)).toEqual(want)
      // Failures counted alike by both (twice the reference's: each note was evaluated twice).
      for (const r of records)
        expect([r.rule.id, saved.shadowStats(r.rule.id).evaluation_errors]).toEqual([
          r.rule.id,
          2 * (errors.get(r.rule.id) ?? 0),
        ])
    }
  })

  test('saves generate no code; a changed chunk is generated after notifications reach it 64 times', async () => {
    const e = engine()
    const records = Array.from({ length: 200 }, (_, i) =>
      record(
        { id: `h${i}`, match: `params.lag == ${i}`, mode: 'active', route: [{ channels: ['x'] }] },
        i + 1,
      ),
    )
    e.load(records)
    const chunks = () =>
      (e as unknown as { program: { chunks: { pending?: boolean; base: number; size: number }[] } }).program
        .chunks
    const turn = () => new Promise((r) => setImmediate(r))
    await turn()
    expect(chunks().some((c) => c.pending)).toBe(false)
    // A burst of saves: each leaves its chunk on the stand-in, and turns of the event loop generate nothing.
    for (let i = 0; i < 200; i += 40)
      e.upsert(
        compileFor(record({ ...records[i].rule, match: `params.lag == ${i} || params.lag == -${i}` }, i + 1)),
      )
    await turn()
    await turn()
    const pending = chunks().filter((c) => c.pending)
    expect(pending.length).toBeGreaterThan(1)
    // Notifications for the first saved rule (h0): each evaluation runs its chunk's stand-in.
    const hit = { type: 't', level: 'info', title: '', body: '', params: { lag: -0 } } as MatchInput
    for (let k = 0; k < 63; k++) expect(e.evaluate(hit, true).outcome?.rule.rule.id).toBe('h0')
    await turn()
    expect(chunks().filter((c) => c.pending).length).toBe(pending.length)
    expect(e.evaluate(hit, true).outcome?.rule.rule.id).toBe('h0')
    // The 64th made it hot: after that turn every pending chunk has its code, deciding the same.
    expect(chunks().filter((c) => c.pending).length).toBe(pending.length)
    await turn()
    expect(chunks().some((c) => c.pending)).toBe(false)
    expect(e.evaluate(hit, true).outcome?.rule.rule.id).toBe('h0')
    expect(e.evaluate({ ...hit, params: { lag: -80 } }, true).outcome?.rule.rule.id).toBe('h80')
    e.stop()
  })

  test('a changed rule recompiles only its own chunk; an added rule moves no other boundary', () => {
    const rules = Array.from({ length: 300 }, (_, i) => ({
      id: `svc-${i}`,
      code: ruleCode(`params.lag == ${i} && level >= "warning"`),
    }))
    const before = program(rules)
    expect(before.chunks.length).toBeGreaterThan(5)
    const changed = rules.map((r, i) => (i === 150 ? { ...r, code: ruleCode('params.lag == -1') } : r))
    const after = program(changed, before)
    const fresh = after.chunks.filter((c, i) => c.fn !== before.chunks[i].fn)
    expect(fresh.map((c) => c.base <= 150 && 150 < c.base + c.size)).toEqual([true])
    const added = program(
      [...rules.slice(0, 10), { id: 'new', code: ruleCode('true') }, ...rules.slice(10)],
      before,
    )
    const reused = added.chunks.filter((c) => before.chunks.some((b) => b.fn === c.fn))
    expect(reused.length).toBe(before.chunks.length - 1)
  })
})

function compileFor(r: RuleRecord) {
  const e = engine()
  e.load([r])
  const c = e.list()[0]
  if (!c) throw new Error(`rule ${r.rule.id} did not compile`)
  return c
}

describe('shadow statistics', () => {
  test('hourly counts in a ring of a week, the last 24 h and 7 d, the 20 newest samples first', () => {
    const e = engine()
    e.load([record({ id: 'sh', match: 'type == "disk"', mode: 'shadow' }, 1)])
    const note = (title: string): MatchInput => ({ type: 'disk', level: 'info', title, body: '', params: {} })
    // 3 hits 200 h ago (their ring slots are reused since), 5 hits 100 h ago, 25 in the last 3 hours.
    for (let i = 0; i < 3; i++) e.evaluate(note(`old ${i}`), false, T0 - 200 * HOUR)
    for (let i = 0; i < 5; i++) e.evaluate(note(`mid ${i}`), false, T0 - 100 * HOUR)
    for (let i = 0; i < 25; i++) e.evaluate(note(`new ${i}`), false, T0 - (i % 3) * HOUR)
    // A hit in the slot that counted 200 h ago (200 - 168 = 32 h ago) resets that slot's old count.
    e.evaluate(note('slot'), false, T0 - 32 * HOUR)
    const s = e.shadowStats('sh', T0)
    expect(s).toMatchObject({ total: 34, last_24h: 25, last_7d: 31, evaluation_errors: 0 })
    expect(s.samples?.length).toBe(20)
    expect(s.samples?.map((x) => x.title).slice(0, 3)).toEqual(['slot', 'new 24', 'new 23'])
    expect(s.samples?.at(-1)?.title).toBe('new 6')
    expect(s.samples?.[1].at).toBe(new Date(T0).toISOString())
  })
})

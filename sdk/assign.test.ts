import { describe, expect, test } from 'bun:test'
import {
  type AssignableExperiment,
  Experiments,
  type ExposureEvent,
  assign,
  bucketOf,
  explain,
  variantFor,
} from './assign'
import { murmur3, murmur3Bytes, murmur3Key } from './murmur3'
import vectors from './test-vectors.json'

/**
 * An independent reference MurmurHash3 x86 32-bit, written the long way: UTF-8 from the
 * platform's TextEncoder, bytes consumed one at a time, 32-bit products built from 16-bit
 * halves instead of Math.imul. It shares no code with sdk/murmur3.ts.
 */
function mul32(a: number, b: number): number {
  const lo = (a & 0xffff) * b
  const hi = (((a >>> 16) * b) & 0xffff) << 16
  return (lo + hi) >>> 0
}
function rotl32(x: number, r: number): number {
  return ((x << r) | (x >>> (32 - r))) >>> 0
}
function referenceMurmur3(text: string, seed = 0): number {
  const bytes = new TextEncoder().encode(text)
  let h = seed >>> 0
  let k = 0
  let filled = 0
  const mix = (kk: number) => mul32(rotl32(mul32(kk, 0xcc9e2d51), 15), 0x1b873593)
  for (const byte of bytes) {
    k = (k + byte * 2 ** (8 * filled)) >>> 0
    filled++
    if (filled === 4) {
      h = (h ^ mix(k)) >>> 0
      h = rotl32(h, 13)
      h = (mul32(h, 5) + 0xe6546b64) >>> 0
      k = 0
      filled = 0
    }
  }
  if (filled > 0) h = (h ^ mix(k)) >>> 0
  h = (h ^ bytes.length) >>> 0
  h = (h ^ (h >>> 16)) >>> 0
  h = mul32(h, 0x85ebca6b)
  h = (h ^ (h >>> 13)) >>> 0
  h = mul32(h, 0xc2b2ae35)
  h = (h ^ (h >>> 16)) >>> 0
  return h
}

// Published MurmurHash3_x86_32 values (SMHasher-verified lists quoted across implementations).
const PUBLISHED: Array<[string, number, number]> = [
  ['', 0, 0],
  ['', 1, 0x514e28b7],
  ['', 0xffffffff, 0x81f16f39],
  ['\0\0\0\0', 0, 0x2362f9de],
  ['hello', 0, 0x248bfa47],
  ['The quick brown fox jumps over the lazy dog', 0, 0x2e4ff723],
  ['a', 0x9747b28c, 0x7fa09ea6],
  ['aa', 0x9747b28c, 0x5d211726],
  ['aaa', 0x9747b28c, 0x283e0130],
  ['aaaa', 0x9747b28c, 0x5a97808a],
  ['abcd', 0x9747b28c, 0xf0478627],
  ['Hello, world!', 0x9747b28c, 0x24884cba],
  ['ππππππππ', 0x9747b28c, 0xd58063c1],
  ['The quick brown fox jumps over the lazy dog', 0x9747b28c, 0x2fa826cd],
]

describe('murmur3', () => {
  test.each(PUBLISHED)('published vector %p seed %p', (text, seed, expected) => {
    expect(referenceMurmur3(text, seed)).toBe(expected)
    expect(murmur3(text, seed)).toBe(expected)
  })

  test('matches the reference on awkward UTF-8: 2-, 3- and 4-byte characters, lone surrogates, every tail length', () => {
    const samples = [
      'é',
      'ß',
      '€',
      '中文字',
      '🎮',
      'a🎮b',
      '\ud800',
      'x\udc00y',
      '\ud83c',
      'ÿ'.repeat(300),
      '🎮'.repeat(200),
    ]
    for (let n = 0; n < 40; n++) samples.push('abcdefghijklmnopqrstuvwxyz0123456789-_:.'.slice(0, n))
    for (const s of samples) expect(murmur3(s)).toBe(referenceMurmur3(s))
  })

  test('matches the reference on 5,000 random strings', () => {
    let seed = 12345
    const rand = () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0
      return seed
    }
    for (let i = 0; i < 5000; i++) {
      const len = rand() % 60
      let s = ''
      for (let j = 0; j < len; j++) {
        const r = rand() % 10
        s += String.fromCharCode(
          r < 7 ? 32 + (rand() % 95) : r < 9 ? 0x80 + (rand() % 0x7000) : 0xd800 + (rand() % 0x800),
        )
      }
      expect(murmur3(s)).toBe(referenceMurmur3(s))
    }
  })

  test('murmur3Key(a, b, c) hashes `${a}:${b}:${c}` exactly, whatever hashed before it', () => {
    let seed = 777
    const rand = () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0
      return seed
    }
    const word = (max: number) => {
      let s = ''
      const len = rand() % max
      for (let j = 0; j < len; j++) {
        const r = rand() % 10
        s += String.fromCharCode(
          r < 7 ? 32 + (rand() % 95) : r < 9 ? 0x80 + (rand() % 0x7000) : 0xd800 + (rand() % 0x800),
        )
      }
      return s
    }
    const prefixes = [
      ['0190f5a2-7c1e-7b3a-9d41-2f6c8e0a1b23', '9f86d081884c7d65'],
      ['', ''],
      ['a', 'bc'],
      ['🎮'.repeat(100), 'ÿ'.repeat(90)],
      ['x\ud800', '\udc00y'],
    ]
    for (let i = 0; i < 3000; i++) {
      // Runs of the same prefix (the cached path), prefix changes, and plain murmur3 calls in between.
      const [a, b] = i % 7 === 0 ? [word(40), word(20)] : prefixes[Math.floor(i / 50) % prefixes.length]
      const c = i % 97 === 0 ? 'z'.repeat(900) : word(30)
      expect(murmur3Key(a, b, c)).toBe(referenceMurmur3(`${a}:${b}:${c}`))
      if (i % 11 === 0) expect(murmur3(c)).toBe(referenceMurmur3(c))
    }
  })

  test('hashes raw bytes with an explicit length', () => {
    const bytes = new TextEncoder().encode('hello world')
    expect(murmur3Bytes(bytes, 0, 5)).toBe(0x248bfa47)
  })
})

describe('published test vectors (sdk/test-vectors.json)', () => {
  const byId = new Map(vectors.experiments.map((e) => [e.id, e as AssignableExperiment]))

  test('cover enough cases', () => {
    expect(vectors.vectors.length).toBeGreaterThanOrEqual(50)
  })

  test.each(vectors.vectors.map((v) => [v.experimentId, v.userId, v] as const))(
    '%s / %p',
    (id, userId, v) => {
      const e = byId.get(id)!
      const input = `${e.id}:${e.salt}:${userId}`
      expect(referenceMurmur3(input)).toBe(v.hash)
      expect(murmur3(input)).toBe(v.hash)
      expect(v.hash % 100).toBe(v.bucket)
      expect(bucketOf(e.id, e.salt, userId)).toBe(v.bucket)
      expect(assign(e, userId)).toBe(v.variant)
    },
  )
})

describe('assignment rule', () => {
  const exp = (
    variants: Array<{ name: string; weight: number }>,
    targeting?: AssignableExperiment['config']['targeting'],
  ): AssignableExperiment => ({
    id: 'e1',
    salt: 's',
    config: { variants, targeting },
  })

  test('walks accumulated weights; bucket equal to the boundary goes to the next variant', () => {
    const v = [
      { name: 'A', weight: 10 },
      { name: 'B', weight: 30 },
      { name: 'C', weight: 60 },
    ]
    expect(variantFor(v, 0)).toBe('A')
    expect(variantFor(v, 9)).toBe('A')
    expect(variantFor(v, 10)).toBe('B')
    expect(variantFor(v, 39)).toBe('B')
    expect(variantFor(v, 40)).toBe('C')
    expect(variantFor(v, 99)).toBe('C')
  })

  test('falls back to the first variant when weights do not reach the bucket, null without variants', () => {
    expect(
      variantFor(
        [
          { name: 'A', weight: 10 },
          { name: 'B', weight: 10 },
        ],
        50,
      ),
    ).toBe('A')
    expect(variantFor([], 5)).toBeNull()
  })

  test('zero-weight variants never win', () => {
    const v = [
      { name: 'A', weight: 0 },
      { name: 'B', weight: 100 },
    ]
    for (let b = 0; b < 100; b++) expect(variantFor(v, b)).toBe('B')
  })

  test('splits users close to the weights', () => {
    const e = exp([
      { name: 'A', weight: 20 },
      { name: 'B', weight: 80 },
    ])
    let a = 0
    for (let i = 0; i < 20_000; i++) if (assign(e, `u${i}`) === 'A') a++
    expect(a / 20_000).toBeGreaterThan(0.18)
    expect(a / 20_000).toBeLessThan(0.22)
  })

  test('targets by platform and country, case-insensitively; a missing attribute excludes when a list is set', () => {
    const e = exp([{ name: 'A', weight: 100 }], { platform: ['IOS', 'ANDROID'], countries: ['US', 'DE'] })
    expect(assign(e, 'u1', { platform: 'ios', country: 'de' })).toBe('A')
    expect(assign(e, 'u1', { platform: 'WEB', country: 'DE' })).toBeNull()
    expect(assign(e, 'u1', { platform: 'IOS', country: 'FR' })).toBeNull()
    expect(assign(e, 'u1', { platform: 'IOS' })).toBeNull()
    expect(assign(e, 'u1')).toBeNull()
    expect(explain(e, 'u1', { platform: 'WEB', country: 'DE' })).toMatchObject({
      eligible: false,
      variant: null,
      reason: "platform 'WEB' is not targeted",
    })
    expect(explain(e, 'u1', { platform: 'IOS' }).reason).toBe(
      'country unknown but the experiment targets countries',
    )
    const open = exp([{ name: 'A', weight: 100 }], { platform: [], countries: [] })
    expect(assign(open, 'u1')).toBe('A')
  })

  test('explain gives the bucket even when excluded', () => {
    const e = exp(
      [
        { name: 'A', weight: 50 },
        { name: 'B', weight: 50 },
      ],
      { countries: ['US'] },
    )
    const out = explain(e, 'user-7', { country: 'FR' })
    expect(out.bucket).toBe(bucketOf('e1', 's', 'user-7'))
    expect(explain(e, 'user-7', { country: 'us' })).toEqual({
      bucket: out.bucket,
      variant: out.bucket < 50 ? 'A' : 'B',
      eligible: true,
    })
  })
})

describe('Experiments (exposure tracking)', () => {
  const e: AssignableExperiment = {
    id: 'exp-1',
    salt: 'salt',
    config: {
      variants: [
        { name: 'A', weight: 50 },
        { name: 'B', weight: 50 },
      ],
    },
  }

  test('sends one experiment_exposure per user and experiment, with exp and variant', () => {
    const sent: ExposureEvent[] = []
    const x = new Experiments({
      gameId: 'g1',
      environment: 'prod',
      track: (ev) => sent.push(ev),
      now: () => 1_700_000_000_000,
    })
    const v = x.assign(e, 'u1')
    x.assign(e, 'u1')
    x.assign(e, 'u1')
    x.assign(e, 'u2')
    expect(sent.length).toBe(2)
    expect(sent[0]).toEqual({
      event: 'experiment_exposure',
      ts: '1700000000000',
      uid: 'u1',
      game_id: 'g1',
      env: 'prod',
      attrs: { exp: 'exp-1', variant: v! },
    })
  })

  test('sends nothing for excluded users and again after a re-bucketing', () => {
    const sent: ExposureEvent[] = []
    const x = new Experiments({ gameId: 'g1', environment: 'prod', track: (ev) => sent.push(ev) })
    expect(
      x.assign({ ...e, config: { ...e.config, targeting: { countries: ['US'] } } }, 'u1', { country: 'FR' }),
    ).toBeNull()
    expect(sent.length).toBe(0)
    x.assign({ ...e, config: { variants: [{ name: 'A', weight: 100 }] } }, 'u1')
    x.assign({ ...e, config: { variants: [{ name: 'B', weight: 100 }] } }, 'u1')
    expect(sent.map((s) => s.attrs.variant)).toEqual(['A', 'B'])
  })

  test('forgets the oldest exposures beyond maxRemembered', () => {
    const sent: ExposureEvent[] = []
    const x = new Experiments({
      gameId: 'g',
      environment: 'dev',
      track: (ev) => sent.push(ev),
      maxRemembered: 2,
    })
    for (const u of ['a', 'b', 'c', 'a']) x.assign(e, u)
    expect(sent.map((s) => s.uid)).toEqual(['a', 'b', 'c', 'a'])
  })
})

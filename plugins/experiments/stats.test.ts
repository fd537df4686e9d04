import { describe, expect, test } from 'bun:test'
import { analyze, chiSquareSurvival, compare, lnGamma, normalTail, srm } from './stats'

/*
 * Expected values are worked out by hand from the formulas (shown beside each case) and were
 * cross-checked with SciPy (norm.sf, chi2.sf, scipy.stats.chisquare) to the digits given.
 */

describe('distributions', () => {
  test('normal tail at known quantiles', () => {
    expect(normalTail(0)).toBeCloseTo(0.5, 14)
    expect(normalTail(1.959963984540054)).toBeCloseTo(0.025, 12)
    expect(normalTail(-1.959963984540054)).toBeCloseTo(0.975, 12)
    // Deep tails keep their relative precision (no 1 - 1 cancellation).
    expect(normalTail(5) / 2.866515718791933e-7).toBeCloseTo(1, 7)
    expect(normalTail(10) / 7.61985302416047e-24).toBeCloseTo(1, 7)
  })

  test('ln Gamma at integers and one half', () => {
    expect(lnGamma(1)).toBeCloseTo(0, 12)
    expect(lnGamma(5)).toBeCloseTo(Math.log(24), 12)
    expect(lnGamma(0.5)).toBeCloseTo(Math.log(Math.sqrt(Math.PI)), 12)
  })

  test('chi-square survival', () => {
    // df = 2 has the closed form exp(-x / 2).
    expect(chiSquareSurvival(16, 2)).toBeCloseTo(Math.exp(-8), 14)
    // df = 1 equals the two-sided normal tail of sqrt(x).
    expect(chiSquareSurvival(4.761904761904762, 1)).toBeCloseTo(
      2 * normalTail(Math.sqrt(4.761904761904762)),
      12,
    )
    expect(chiSquareSurvival(30, 4) / 4.894437128029217e-6).toBeCloseTo(1, 9)
    expect(chiSquareSurvival(0.5, 7)).toBeCloseTo(0.9994464813904249, 12)
    expect(chiSquareSurvival(0, 3)).toBe(1)
  })
})

describe('two-proportion comparison', () => {
  test('B converts better: 130/1000 against 100/1000', () => {
    // pa = 0.10, pb = 0.13, difference 0.03, uplift 0.03 / 0.10 = 0.30.
    // pooled p = 230 / 2000 = 0.115; SE = sqrt(0.115 * 0.885 * (1/1000 + 1/1000)) = sqrt(0.00020355) = 0.0142671
    // z = 0.03 / 0.0142671 = 2.10274; p = 2 * (1 - Phi(2.10274)) = 0.0354885 -> significant.
    // Unpooled SE = sqrt(0.1 * 0.9 / 1000 + 0.13 * 0.87 / 1000) = sqrt(0.0002031) = 0.0142513
    // CI = 0.03 -+ 1.959964 * 0.0142513 = [0.0020679, 0.0579321].
    const c = compare({ n: 1000, x: 100 }, { n: 1000, x: 130 })!
    expect(c.difference).toBeCloseTo(0.03, 12)
    expect(c.uplift!).toBeCloseTo(0.3, 12)
    expect(c.zScore).toBeCloseTo(2.102741, 5)
    expect(c.pValue).toBeCloseTo(0.0354885, 6)
    expect(c.significant).toBe(true)
    expect(c.ci95.lower).toBeCloseTo(0.0020679, 6)
    expect(c.ci95.upper).toBeCloseTo(0.0579321, 6)
    expect(c.upliftCi95!.lower).toBeCloseTo(0.020679, 5)
    expect(c.upliftCi95!.upper).toBeCloseTo(0.579321, 5)
  })

  test('B converts worse: 240/2000 against 300/2000', () => {
    // pa = 0.15, pb = 0.12, uplift -0.2; pooled 540 / 4000 = 0.135;
    // SE = sqrt(0.135 * 0.865 * (2 / 2000)) = 0.0108062; z = -0.03 / 0.0108062 = -2.77617; p = 0.0055003.
    // Unpooled SE = sqrt(0.15 * 0.85 / 2000 + 0.12 * 0.88 / 2000) = 0.0107958; CI = -0.03 -+ 0.0211594.
    const c = compare({ n: 2000, x: 300 }, { n: 2000, x: 240 })!
    expect(c.uplift!).toBeCloseTo(-0.2, 12)
    expect(c.zScore).toBeCloseTo(-2.776172, 5)
    expect(c.pValue).toBeCloseTo(0.0055003, 6)
    expect(c.significant).toBe(true)
    expect(c.ci95.lower).toBeCloseTo(-0.0511594, 6)
    expect(c.ci95.upper).toBeCloseTo(-0.0088406, 6)
  })

  test('a small difference is not significant: 55/500 against 50/500', () => {
    // pooled 105 / 1000 = 0.105; SE = sqrt(0.105 * 0.895 * 0.004) = 0.0193881; z = 0.01 / 0.0193881 = 0.515779;
    // p = 0.606009. CI = 0.01 -+ 1.959964 * 0.0193856 = [-0.0279950, 0.0479950].
    const c = compare({ n: 500, x: 50 }, { n: 500, x: 55 })!
    expect(c.pValue).toBeCloseTo(0.606009, 5)
    expect(c.significant).toBe(false)
    expect(c.ci95.lower).toBeCloseTo(-0.027995, 6)
    expect(c.ci95.upper).toBeCloseTo(0.047995, 6)
  })

  test('degenerate counts', () => {
    expect(compare({ n: 0, x: 0 }, { n: 10, x: 1 })).toBeNull()
    expect(compare({ n: 10, x: 1 }, { n: 0, x: 0 })).toBeNull()
    // Nobody converted anywhere: no evidence of a difference, and no relative uplift.
    const zero = compare({ n: 100, x: 0 }, { n: 100, x: 0 })!
    expect(zero).toMatchObject({
      uplift: null,
      upliftCi95: null,
      difference: 0,
      zScore: 0,
      pValue: 1,
      significant: false,
      ci95: { lower: 0, upper: 0 },
    })
    // Control at 0, B at 5/100: the difference is still tested, the relative uplift is undefined.
    // pooled 5 / 200 = 0.025, SE = sqrt(0.025 * 0.975 * 0.02) = 0.0220794, z = 0.05 / 0.0220794 = 2.26455.
    const fromZero = compare({ n: 100, x: 0 }, { n: 100, x: 5 })!
    expect(fromZero.uplift).toBeNull()
    expect(fromZero.zScore).toBeCloseTo(2.26455, 4)
  })
})

describe('sample-ratio mismatch', () => {
  test('50/50 with 1000 and 1100: chi-square 4.7619, p 0.0291, no mismatch at 0.001', () => {
    // expected 1050 each; chi = 2 * 50^2 / 1050 = 4.761905; df 1; p = 2 * Q(sqrt(4.761905)) = 0.0290963.
    const s = srm([1000, 1100], [50, 50])
    expect(s.chiSquare!).toBeCloseTo(4.761905, 5)
    expect(s.degreesOfFreedom).toBe(1)
    expect(s.pValue!).toBeCloseTo(0.0290963, 6)
    expect(s.mismatch).toBe(false)
  })

  test('50/50 with 1000 and 1200: chi-square 18.18, p 2.0e-5, mismatch', () => {
    // expected 1100 each; chi = 2 * 100^2 / 1100 = 18.181818; p = 2.007866e-5.
    const s = srm([1000, 1200], [50, 50])
    expect(s.chiSquare!).toBeCloseTo(18.181818, 5)
    expect(s.pValue! / 2.007865612426481e-5).toBeCloseTo(1, 6)
    expect(s.mismatch).toBe(true)
  })

  test('three equal weights with 5000, 4800, 5200: chi-square 16, df 2, p = exp(-8)', () => {
    // expected 5000 each; chi = (0 + 200^2 + 200^2) / 5000 = 16; df 2 so p = exp(-16 / 2) = 0.00033546.
    const s = srm([5000, 4800, 5200], [100 / 3, 100 / 3, 100 / 3])
    expect(s.chiSquare!).toBeCloseTo(16, 10)
    expect(s.pValue!).toBeCloseTo(Math.exp(-8), 12)
    expect(s.mismatch).toBe(true)
  })

  test('exact split, no exposures, weight-0 variant with exposures', () => {
    expect(srm([900, 100], [90, 10])).toEqual({
      chiSquare: 0,
      degreesOfFreedom: 1,
      pValue: 1,
      mismatch: false,
    })
    expect(srm([0, 0], [50, 50])).toEqual({
      chiSquare: null,
      degreesOfFreedom: 1,
      pValue: null,
      mismatch: false,
    })
    expect(srm([10, 5], [100, 0])).toEqual({
      chiSquare: null,
      degreesOfFreedom: 0,
      pValue: 0,
      mismatch: true,
    })
  })
})

describe('analyze', () => {
  const exp = {
    id: 'e1',
    status: 'running' as const,
    config: {
      variants: [
        { name: 'A', weight: 50 },
        { name: 'B', weight: 50 },
      ],
      metrics: { primary: 'purchase', secondary: ['level_up', 'purchase'] },
    },
  }

  test('primary and secondary metrics against the first variant, SRM, unexpected variants', () => {
    const r = analyze(exp, {
      variants: {
        A: { exposures: 1000, conversions: { purchase: 100, level_up: 500 } },
        B: { exposures: 1000, conversions: { purchase: 130 } },
        Z: { exposures: 3, conversions: {} },
      },
    })
    expect(r.control).toBe('A')
    expect(r.totalExposures).toBe(2000)
    expect(r.exposures).toEqual([
      { name: 'A', weight: 50, exposures: 1000, share: 0.5 },
      { name: 'B', weight: 50, exposures: 1000, share: 0.5 },
    ])
    expect(r.primary!.metric).toBe('purchase')
    expect(r.primary!.variants[0]).toEqual({
      name: 'A',
      exposures: 1000,
      conversions: 100,
      conversionRate: 0.1,
      vsControl: null,
    })
    expect(r.primary!.variants[1].conversionRate).toBe(0.13)
    expect(r.primary!.variants[1].vsControl!.pValue).toBeCloseTo(0.0354885, 6)
    // The primary metric listed again among the secondary ones is not analysed twice.
    expect(r.secondary.map((m) => m.metric)).toEqual(['level_up'])
    expect(r.secondary[0].variants[1]).toMatchObject({ conversions: 0, conversionRate: 0 })
    expect(r.secondary[0].variants[1].vsControl!.uplift).toBe(-1)
    expect(r.srm).toEqual({ chiSquare: 0, degreesOfFreedom: 1, pValue: 1, mismatch: false })
    expect(r.unexpectedVariants).toEqual([{ name: 'Z', exposures: 3 }])
  })

  test('no events yet, no primary metric', () => {
    const r = analyze({ ...exp, config: { variants: exp.config.variants } }, { variants: {} })
    expect(r.totalExposures).toBe(0)
    expect(r.primary).toBeNull()
    expect(r.secondary).toEqual([])
    expect(r.srm.pValue).toBeNull()
    expect(r.exposures.map((e) => e.share)).toEqual([0, 0])
  })
})

describe('analyze with names from Object.prototype', () => {
  test('configured variants named toString, constructor, valueOf, hasOwnProperty, __proto__ without counts read as none', () => {
    const names = ['toString', 'constructor', 'valueOf', 'hasOwnProperty', '__proto__']
    const r = analyze(
      {
        id: 'e2',
        status: 'running',
        config: { variants: names.map((name) => ({ name, weight: 20 })), metrics: { primary: 'buy' } },
      },
      // A plain object, as a caller may build one: its prototype's members are no variants.
      { variants: { toString: { exposures: 4, conversions: { buy: 1 } } } as never },
    )
    expect(r.exposures.map((e) => e.exposures)).toEqual([4, 0, 0, 0, 0])
    expect(r.primary!.variants.map((v) => v.conversions)).toEqual([1, 0, 0, 0, 0])
    expect(r.unexpectedVariants).toEqual([])
  })
})

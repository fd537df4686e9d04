/**
 * The statistics of experiment results: two-proportion z-tests against the control, 95%
 * confidence intervals and a chi-square sample-ratio-mismatch test. Pure functions over counts,
 * so they are tested against values worked out by hand.
 */
import { type ExperimentCounts, UNEXPECTED_SHOWN } from './exposures'
import type { Experiment, Results } from './schema'

/** z for a two-sided 95% interval. */
export const Z95 = 1.959963984540054
export const ALPHA = 0.05
/** SRM is flagged this far out: a real mismatch shows up with a tiny p-value, noise rarely does. */
export const SRM_ALPHA = 0.001

/**
 * Upper tail of the standard normal, Q(z) = 1 - Phi(z), for z >= 0, to about 1e-14 relative
 * (Hart's rational approximation as given by West, "Better approximations to cumulative normal
 * functions", 2005). Computing the tail directly keeps tiny p-values exact instead of 1 - 1.
 */
export function normalTail(z: number): number {
  const x = Math.abs(z)
  let c: number
  if (x > 37) c = 0
  else {
    const e = Math.exp((-x * x) / 2)
    if (x < 7.07106781186547) {
      let n = 3.52624965998911e-2 * x + 0.700383064443688
      n = n * x + 6.37396220353165
      n = n * x + 33.912866078383
      n = n * x + 112.079291497871
      n = n * x + 221.213596169931
      n = n * x + 220.206867912376
      let d = 8.83883476483184e-2 * x + 1.75566716318264
      d = d * x + 16.064177579207
      d = d * x + 86.7807322029461
      d = d * x + 296.564248779674
      d = d * x + 637.333633378831
      d = d * x + 793.826512519948
      d = d * x + 440.413735824752
      c = (e * n) / d
    } else {
      let d = x + 0.65
      d = x + 4 / d
      d = x + 3 / d
      d = x + 2 / d
      d = x + 1 / d
      c = e / d / 2.506628274631
    }
  }
  return z >= 0 ? c : 1 - c
}

const LANCZOS = [
  0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
  12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
]

/** ln Gamma(a) for a > 0 (Lanczos, g = 7). */
export function lnGamma(a: number): number {
  if (a < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * a)) - lnGamma(1 - a)
  const x = a - 1
  let s = LANCZOS[0]
  for (let i = 1; i < 9; i++) s += LANCZOS[i] / (x + i)
  const t = x + 7.5
  return 0.5 * Math.log(2 * Math.PI) + (x + 0.5) * Math.log(t) - t + Math.log(s)
}

/** Regularized upper incomplete gamma Q(a, x): series below a + 1, continued fraction above. */
export function gammaQ(a: number, x: number): number {
  if (x <= 0) return 1
  const lnPre = -x + a * Math.log(x) - lnGamma(a)
  if (x < a + 1) {
    let sum = 1 / a
    let term = sum
    for (let n = 1; n < 1000; n++) {
      term *= x / (a + n)
      sum += term
      if (Math.abs(term) < Math.abs(sum) * 1e-16) break
    }
    return Math.max(0, 1 - sum * Math.exp(lnPre))
  }
  // Modified Lentz evaluation of the continued fraction.
  const tiny = 1e-300
  let b = x + 1 - a
  let c = 1 / tiny
  let d = 1 / b
  let h = d
  for (let i = 1; i < 1000; i++) {
    const an = -i * (i - a)
    b += 2
    d = an * d + b
    if (Math.abs(d) < tiny) d = tiny
    c = b + an / c
    if (Math.abs(c) < tiny) c = tiny
    d = 1 / d
    const delta = d * c
    h *= delta
    if (Math.abs(delta - 1) < 1e-16) break
  }
  return Math.exp(lnPre) * h
}

/** P(X >= x) for X chi-square distributed with `df` degrees of freedom. */
export function chiSquareSurvival(x: number, df: number): number {
  return gammaQ(df / 2, x / 2)
}

export interface Proportion {
  /** Users exposed. */
  n: number
  /** Users converted. */
  x: number
}

export type Comparison = NonNullable<Results['secondary'][number]['variants'][number]['vsControl']>

/**
 * Variant against control. p-value: two-sided two-proportion z-test with the pooled rate (the
 * test's null hypothesis is equal rates). Interval: the unpooled (Wald) 95% interval of the
 * difference. Null when either side has no exposures.
 */
export function compare(control: Proportion, variant: Proportion): Comparison | null {
  if (control.n <= 0 || variant.n <= 0) return null
  const pa = control.x / control.n
  const pb = variant.x / variant.n
  const diff = pb - pa
  const pooled = (control.x + variant.x) / (control.n + variant.n)
  const sePooled = Math.sqrt(pooled * (1 - pooled) * (1 / control.n + 1 / variant.n))
  const z = sePooled > 0 ? diff / sePooled : 0
  const pValue = sePooled > 0 ? Math.min(1, 2 * normalTail(Math.abs(z))) : 1
  const se = Math.sqrt((pa * (1 - pa)) / control.n + (pb * (1 - pb)) / variant.n)
  const ci95 = { lower: diff - Z95 * se, upper: diff + Z95 * se }
  return {
    uplift: pa > 0 ? diff / pa : null,
    difference: diff,
    ci95,
    upliftCi95: pa > 0 ? { lower: ci95.lower / pa, upper: ci95.upper / pa } : null,
    zScore: z,
    pValue,
    significant: pValue < ALPHA,
  }
}

export type Srm = Results['srm']

/**
 * Sample-ratio mismatch: chi-square goodness of fit of the observed exposures against the
 * configured weights. A variant with weight 0 that still got exposures is a mismatch outright.
 */
export function srm(observed: readonly number[], weights: readonly number[]): Srm {
  const total = observed.reduce((a, b) => a + b, 0)
  const weightSum = weights.reduce((a, b) => a + b, 0)
  let chi = 0
  let cells = 0
  let impossible = false
  for (let i = 0; i < observed.length; i++) {
    if (weights[i] > 0) {
      cells++
      const expected = (total * weights[i]) / weightSum
      if (expected > 0) chi += (observed[i] - expected) ** 2 / expected
    } else if (observed[i] > 0) impossible = true
  }
  const df = Math.max(0, cells - 1)
  if (total === 0 || (df === 0 && !impossible))
    return { chiSquare: null, degreesOfFreedom: df, pValue: null, mismatch: false }
  if (impossible) return { chiSquare: null, degreesOfFreedom: df, pValue: 0, mismatch: true }
  const pValue = chiSquareSurvival(chi, df)
  return { chiSquare: chi, degreesOfFreedom: df, pValue, mismatch: pValue < SRM_ALPHA }
}

type AnalyzedExperiment = Pick<Experiment, 'id' | 'status' | 'config'>

/** The whole results document of one experiment from the event counts. */
export function analyze(exp: AnalyzedExperiment, counts: ExperimentCounts): Results {
  const variants = exp.config.variants
  const configured = new Set(variants.map((v) => v.name))
  // Names are free text: `toString` or `__proto__` must not find Object.prototype's members.
  const of = (name: string) => (Object.hasOwn(counts.variants, name) ? counts.variants[name] : undefined)
  const exposures = variants.map((v) => of(v.name)?.exposures ?? 0)
  const total = exposures.reduce((a, b) => a + b, 0)
  const metric = (name: string) => {
    const rows = variants.map((v, i) => {
      const n = exposures[i]
      const c = of(v.name)?.conversions
      const x = c && Object.hasOwn(c, name) ? c[name] : 0
      return { name: v.name, n, x }
    })
    const control = rows[0]
    return {
      metric: name,
      variants: rows.map((r, i) => ({
        name: r.name,
        exposures: r.n,
        conversions: r.x,
        conversionRate: r.n > 0 ? r.x / r.n : 0,
        vsControl: i === 0 ? null : compare(control, r),
      })),
    }
  }
  const primary = exp.config.metrics?.primary
  const secondary = (exp.config.metrics?.secondary ?? []).filter((m) => m !== primary)
  return {
    experimentId: exp.id,
    status: exp.status,
    control: variants[0]?.name ?? null,
    totalExposures: total,
    exposures: variants.map((v, i) => ({
      name: v.name,
      weight: v.weight,
      exposures: exposures[i],
      share: total > 0 ? exposures[i] / total : 0,
    })),
    primary: primary && variants.length ? metric(primary) : null,
    secondary: variants.length ? secondary.map(metric) : [],
    srm: srm(
      exposures,
      variants.map((v) => v.weight),
    ),
    unexpectedVariants: unexpected(counts, configured),
  }
}

/**
 * Exposures naming no configured variant: the `UNEXPECTED_SHOWN` with the most, then one line
 * counting the rest (`others` names), so a flood of made-up names keeps the answer small.
 */
function unexpected(
  counts: ExperimentCounts,
  configured: ReadonlySet<string>,
): Results['unexpectedVariants'] {
  const all = Object.keys(counts.variants)
    .filter((name) => !configured.has(name))
    .map((name) => ({ name, exposures: counts.variants[name].exposures }))
    .sort((a, b) => b.exposures - a.exposures || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  const shown: Results['unexpectedVariants'] = all.slice(0, UNEXPECTED_SHOWN)
  const others = all.length - shown.length + (counts.rest?.variants ?? 0)
  if (others > 0) {
    const exposures =
      all.slice(UNEXPECTED_SHOWN).reduce((a, v) => a + v.exposures, 0) + (counts.rest?.exposures ?? 0)
    shown.push({ name: `${others} other ${others === 1 ? 'name' : 'names'}`, exposures, others })
  }
  return shown
}

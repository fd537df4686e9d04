/**
 * The numeric training set every algorithm reads: rows of `d` features in one row-major
 * Float64Array (1M x 20 is 160 MB in one block, transferable to a Worker without a copy) and
 * one target per row.
 */
export interface Dataset {
  /** Row-major, `n * d` values. */
  x: Float64Array
  /** One target per row (class 0/1, a value, or unused). */
  y: Float64Array
  n: number
  d: number
  features: string[]
}

/** Mulberry32: a small seeded generator, so a split and an initialization repeat for one seed. */
export function rng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** Rows picked by `idx`, copied into a dataset of their own. */
export function take(ds: Dataset, idx: Uint32Array): Dataset {
  const { d } = ds
  const x = new Float64Array(idx.length * d)
  const y = new Float64Array(idx.length)
  for (let i = 0; i < idx.length; i++) {
    const r = idx[i]
    x.set(ds.x.subarray(r * d, r * d + d), i * d)
    y[i] = ds.y[r]
  }
  return { x, y, n: idx.length, d, features: ds.features }
}

/**
 * A seeded shuffle split into training and holdout rows (`testShare` of them, at least one of
 * each when there are two or more rows).
 */
export function split(ds: Dataset, testShare: number, seed: number): { train: Dataset; test: Dataset } {
  const idx = new Uint32Array(ds.n)
  for (let i = 0; i < ds.n; i++) idx[i] = i
  const r = rng(seed)
  for (let i = ds.n - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1))
    const t = idx[i]
    idx[i] = idx[j]
    idx[j] = t
  }
  let nTest = Math.round(ds.n * testShare)
  if (ds.n >= 2) nTest = Math.min(ds.n - 1, Math.max(1, nTest))
  return { test: take(ds, idx.subarray(0, nTest)), train: take(ds, idx.subarray(nTest)) }
}

/** Per-feature mean and standard deviation (1 where a feature is constant, so scaling is a no-op). */
export function moments(ds: Dataset): { mean: number[]; std: number[] } {
  const { x, n, d } = ds
  const mean = new Float64Array(d)
  const sq = new Float64Array(d)
  for (let i = 0; i < n; i++) {
    const o = i * d
    for (let j = 0; j < d; j++) mean[j] += x[o + j]
  }
  for (let j = 0; j < d; j++) mean[j] /= n || 1
  for (let i = 0; i < n; i++) {
    const o = i * d
    for (let j = 0; j < d; j++) {
      const v = x[o + j] - mean[j]
      sq[j] += v * v
    }
  }
  const std = [...sq].map((s) => {
    const v = Math.sqrt(s / (n || 1))
    return v > 1e-12 ? v : 1
  })
  return { mean: [...mean], std }
}

/** Standardizes in place with the given moments. */
export function scale(ds: Dataset, mean: readonly number[], std: readonly number[]): void {
  const { x, n, d } = ds
  for (let i = 0; i < n; i++) {
    const o = i * d
    for (let j = 0; j < d; j++) x[o + j] = (x[o + j] - mean[j]) / std[j]
  }
}

/**
 * The training distribution of each feature for drift checks: decile edges and the share of
 * rows in each of the bins they make (Population Stability Index baseline).
 */
export interface FeatureProfile {
  feature: string
  /** Upper edges of all bins but the last (ascending, de-duplicated). */
  edges: number[]
  /** Share of training rows per bin; `edges.length + 1` entries summing to 1. */
  shares: number[]
}

/** Profiles from at most 20,000 evenly spaced rows, so a million-row set costs milliseconds. */
export function profile(ds: Dataset, bins = 10): FeatureProfile[] {
  const { x, n, d } = ds
  const step = Math.max(1, Math.floor(n / 20000))
  const out: FeatureProfile[] = []
  for (let j = 0; j < d; j++) {
    const col: number[] = []
    for (let i = 0; i < n; i += step) col.push(x[i * d + j])
    col.sort((a, b) => a - b)
    const edges: number[] = []
    for (let b = 1; b < bins; b++) {
      const e = col[Math.min(col.length - 1, Math.floor((b * col.length) / bins))]
      if (e !== undefined && (edges.length === 0 || e > edges[edges.length - 1])) edges.push(e)
    }
    const counts = new Array(edges.length + 1).fill(0)
    for (const v of col) counts[binOf(edges, v)]++
    out.push({ feature: ds.features[j], edges, shares: counts.map((c) => c / (col.length || 1)) })
  }
  return out
}

/** Bin `v` falls in: the first edge it does not exceed... strictly, values equal to an edge go below it. */
export function binOf(edges: readonly number[], v: number): number {
  let lo = 0
  let hi = edges.length
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if (v <= edges[mid]) hi = mid
    else lo = mid + 1
  }
  return lo
}

/**
 * Population Stability Index of observed bin counts against the training shares; empty bins
 * get a floor of 1e-4 so one missing bin cannot make it infinite. Below 0.1 stable, 0.1 to 0.25
 * a moderate shift, above 0.25 a major one (the usual reading).
 */
export function psi(expected: readonly number[], observed: readonly number[]): number {
  const total = observed.reduce((a, b) => a + b, 0)
  if (!total) return 0
  let s = 0
  for (let i = 0; i < expected.length; i++) {
    const e = Math.max(expected[i], 1e-4)
    const a = Math.max((observed[i] ?? 0) / total, 1e-4)
    s += (a - e) * Math.log(a / e)
  }
  return s
}

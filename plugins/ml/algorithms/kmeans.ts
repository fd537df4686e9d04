import { kmeans } from 'ml-kmeans'
import { type Dataset, moments } from './data'

export interface KMeansModel {
  kind: 'kmeans'
  mean: number[]
  std: number[]
  /** On standardized features. */
  centroids: number[][]
  /** Training rows per cluster. */
  sizes: number[]
  iterations: number
}

export interface KMeansParams {
  k: number
  maxIterations: number
  tolerance: number
  seed: number
}

/**
 * k-means++ from ml-kmeans (Lloyd iterations) on standardized features, so a feature counted in
 * thousands does not drown one counted in units.
 */
export function trainKMeans(ds: Dataset, p: KMeansParams): KMeansModel {
  const { x, n, d } = ds
  if (n < p.k) throw new Error(`k-means needs at least k = ${p.k} rows, the training set has ${n}`)
  const { mean, std } = moments(ds)
  const rows: number[][] = new Array(n)
  for (let i = 0; i < n; i++) {
    const r = new Array(d)
    for (let j = 0; j < d; j++) r[j] = (x[i * d + j] - mean[j]) / std[j]
    rows[i] = r
  }
  const res = kmeans(rows, p.k, {
    initialization: 'kmeans++',
    maxIterations: p.maxIterations,
    tolerance: p.tolerance,
    seed: p.seed,
  })
  const sizes = new Array(p.k).fill(0)
  for (const c of res.clusters) sizes[c]++
  return { kind: 'kmeans', mean, std, centroids: res.centroids, sizes, iterations: res.iterations }
}

/** Squared distances of one raw feature vector to every centroid. */
export function kmeansDistances(m: KMeansModel, v: ArrayLike<number>): number[] {
  return m.centroids.map((c) => {
    let s = 0
    for (let j = 0; j < c.length; j++) {
      const z = (v[j] - m.mean[j]) / m.std[j] - c[j]
      s += z * z
    }
    return s
  })
}

/** Mean silhouette of (at most 2,000 evenly spaced) standardized rows; 0 with one cluster. */
export function silhouette(m: KMeansModel, ds: Dataset): number {
  const step = Math.max(1, Math.floor(ds.n / 2000))
  const pts: number[][] = []
  const lab: number[] = []
  for (let i = 0; i < ds.n; i += step) {
    const raw = ds.x.subarray(i * ds.d, i * ds.d + ds.d)
    const dist = kmeansDistances(m, raw)
    lab.push(dist.indexOf(Math.min(...dist)))
    pts.push([...raw].map((v, j) => (v - m.mean[j]) / m.std[j]))
  }
  const k = m.centroids.length
  let total = 0
  for (let i = 0; i < pts.length; i++) {
    const sum = new Array(k).fill(0)
    const cnt = new Array(k).fill(0)
    for (let j = 0; j < pts.length; j++) {
      if (i === j) continue
      let s = 0
      for (let f = 0; f < pts[i].length; f++) s += (pts[i][f] - pts[j][f]) ** 2
      sum[lab[j]] += Math.sqrt(s)
      cnt[lab[j]]++
    }
    const a = cnt[lab[i]] ? sum[lab[i]] / cnt[lab[i]] : 0
    let b = Number.POSITIVE_INFINITY
    for (let c = 0; c < k; c++) if (c !== lab[i] && cnt[c]) b = Math.min(b, sum[c] / cnt[c])
    if (Number.isFinite(b) && Math.max(a, b) > 0) total += (b - a) / Math.max(a, b)
  }
  return pts.length ? total / pts.length : 0
}

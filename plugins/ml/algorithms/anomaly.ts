import type { Dataset } from './data'

export interface RobustZModel {
  kind: 'robust_zscore'
  median: number[]
  /** Median absolute deviation per feature (a floor keeps a constant feature from dividing by 0). */
  mad: number[]
  threshold: number
}

function median(sorted: Float64Array): number {
  const n = sorted.length
  if (!n) return 0
  return n % 2 ? sorted[(n - 1) >> 1] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2
}

/**
 * The modified z-score of Iglewicz and Hoaglin: 0.6745 (x - median) / MAD per feature; a row's
 * score is its largest over the features and it is an anomaly above `threshold` (3.5 is theirs).
 * Median and MAD ignore the outliers they are meant to find, unlike mean and standard deviation.
 */
export function trainRobustZ(ds: Dataset, threshold: number): RobustZModel {
  const { x, n, d } = ds
  const med: number[] = []
  const mad: number[] = []
  const col = new Float64Array(n)
  for (let j = 0; j < d; j++) {
    for (let i = 0; i < n; i++) col[i] = x[i * d + j]
    col.sort()
    const m = median(col)
    for (let i = 0; i < n; i++) col[i] = Math.abs(x[i * d + j] - m)
    col.sort()
    med.push(m)
    mad.push(Math.max(median(col), 1e-9))
  }
  return { kind: 'robust_zscore', median: med, mad, threshold }
}

export function robustScore(m: RobustZModel, v: ArrayLike<number>): number {
  let s = 0
  for (let j = 0; j < m.median.length; j++)
    s = Math.max(s, (0.6745 * Math.abs(v[j] - m.median[j])) / m.mad[j])
  return s
}

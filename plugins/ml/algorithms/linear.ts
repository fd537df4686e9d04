import { type Dataset, moments } from './data'
import { solveSpd } from './linalg'

export interface LinearModel {
  kind: 'linear_regression' | 'ridge_regression'
  /** Coefficients on raw features (the penalty is applied on the standardized scale). */
  weights: number[]
  bias: number
  /** Standard deviation of the training residuals (for prediction intervals). */
  residualStd: number
}

/**
 * Least squares with an optional L2 penalty (ridge), from the normal equations: one pass
 * accumulates X'X and X'y of the centred, standardized features, then a (d x d) solve. With
 * `l2 = 0` this is ordinary least squares; the intercept is never penalized.
 */
export function trainLinear(
  ds: Dataset,
  l2: number,
  kind: LinearModel['kind'],
  progress: (share: number) => void = () => undefined,
): LinearModel {
  const { x, y, n, d } = ds
  const { mean, std } = moments(ds)
  let ym = 0
  for (let i = 0; i < n; i++) ym += y[i]
  ym /= n || 1
  const xtx = new Float64Array(d * d)
  const xty = new Float64Array(d)
  const z = new Float64Array(d)
  for (let i = 0; i < n; i++) {
    const o = i * d
    for (let j = 0; j < d; j++) z[j] = (x[o + j] - mean[j]) / std[j]
    const t = y[i] - ym
    for (let a = 0; a < d; a++) {
      const za = z[a]
      xty[a] += za * t
      for (let b = a; b < d; b++) xtx[a * d + b] += za * z[b]
    }
    if ((i & 0xffff) === 0) progress((0.9 * i) / n)
  }
  const A: number[][] = []
  for (let a = 0; a < d; a++) {
    const row: number[] = []
    for (let b = 0; b < d; b++) row.push(a <= b ? xtx[a * d + b] : xtx[b * d + a])
    row[a] += l2
    A.push(row)
  }
  const beta = d ? solveSpd(A, [...xty]) : []
  const weights = beta.map((b, j) => b / std[j])
  const bias = ym - weights.reduce((s, w, j) => s + w * mean[j], 0)
  let sse = 0
  for (let i = 0; i < n; i++) {
    let p = bias
    for (let j = 0; j < d; j++) p += weights[j] * x[i * d + j]
    sse += (y[i] - p) ** 2
  }
  progress(1)
  return { kind, weights, bias, residualStd: Math.sqrt(sse / Math.max(1, n - d - 1)) }
}

export function linearPredict(m: LinearModel, v: ArrayLike<number>): number {
  let p = m.bias
  for (let j = 0; j < m.weights.length; j++) p += m.weights[j] * v[j]
  return p
}

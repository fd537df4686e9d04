import { type Dataset, moments } from './data'

/*
 * What a fit may read and store: finite numbers only. Values whose sums overflow (two of 1e308)
 * made every weight and metric NaN; stored, JSON turned them into null, the model's reads failed
 * their response schema and its predictions answered 0. Such a training fails instead, saying why.
 */

/** Throws when a feature (or the target, when `target` names it) is too large to fit. */
export function checkScale(data: Dataset, target?: string): void {
  const m = moments(data)
  for (let j = 0; j < data.d; j++)
    if (!Number.isFinite(m.mean[j]) || !Number.isFinite(m.std[j]))
      throw new Error(
        `feature '${data.features[j]}' has values too large to fit (their sum or spread overflows); scale them down`,
      )
  if (target !== undefined) {
    const y = moments({ x: data.y, y: data.y, n: data.y.length, d: 1, features: [target] })
    if (!Number.isFinite(y.mean[0]) || !Number.isFinite(y.std[0]))
      throw new Error(
        `the ${target} has values too large to fit (their sum or spread overflows); scale them down`,
      )
  }
}

/** The first number of `v` (an artifact, as JSON would store it) that is not finite, by its path. */
function nonFinite(v: unknown, path: string): string | undefined {
  if (typeof v === 'number') return Number.isFinite(v) ? undefined : `${path} = ${v}`
  if (v === null || typeof v !== 'object') return undefined
  for (const [k, x] of Object.entries(v)) {
    const found = nonFinite(x, Array.isArray(v) ? `${path}[${k}]` : `${path}.${k}`)
    if (found) return found
  }
  return undefined
}

/** Throws when a fit's metrics or artifact hold a number that is not finite: nothing is stored. */
export function checkFit(out: { artifact: unknown; metrics: Record<string, number> }): void {
  const bad = nonFinite(out.metrics, 'metrics') ?? nonFinite(out.artifact, 'model')
  if (bad)
    throw new Error(
      `the fit is not usable (${bad}): the data's values are too large or too spread to fit; scale them down`,
    )
}

export interface HoltWintersParams {
  seasonLength: number
  /** Smoothing of level, trend and season; absent ones are fitted (grid search on one-step SSE). */
  alpha?: number
  beta?: number
  gamma?: number
}

export interface HoltWintersModel {
  kind: 'holt_winters'
  alpha: number
  beta: number
  gamma: number
  seasonLength: number
  /** State after the last observation. */
  level: number
  trend: number
  /** Seasonal terms; `season[(n + h - 1) % m]` belongs to step h after the last observation. */
  season: number[]
  /** Observations the state has seen. */
  n: number
}

interface Run {
  sse: number
  level: number
  trend: number
  season: number[]
}

/**
 * Additive Holt-Winters (triple exponential smoothing) with the classic initialization: level =
 * mean of the first season, trend = mean change per step between the first two seasons,
 * seasonal terms = the first season's deviations from its mean.
 */
function run(y: ArrayLike<number>, m: number, a: number, b: number, g: number): Run {
  let l0 = 0
  let l1 = 0
  for (let i = 0; i < m; i++) {
    l0 += y[i]
    l1 += y[m + i]
  }
  l0 /= m
  l1 /= m
  let level = l0
  let trend = (l1 - l0) / m
  const season = new Array(m)
  for (let i = 0; i < m; i++) season[i] = y[i] - l0
  let sse = 0
  for (let t = m; t < y.length; t++) {
    const s = season[t % m]
    const f = level + trend + s
    sse += (y[t] - f) ** 2
    const prev = level
    level = a * (y[t] - s) + (1 - a) * (level + trend)
    trend = b * (level - prev) + (1 - b) * trend
    season[t % m] = g * (y[t] - level) + (1 - g) * s
  }
  return { sse, level, trend, season }
}

const GRID = [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95]

export function trainHoltWinters(y: ArrayLike<number>, p: HoltWintersParams): HoltWintersModel {
  const m = p.seasonLength
  if (y.length < 2 * m)
    throw new Error(`Holt-Winters needs two seasons (${2 * m} points) at least, the series has ${y.length}`)
  const as = p.alpha !== undefined ? [p.alpha] : GRID
  const bs = p.beta !== undefined ? [p.beta] : GRID
  const gs = p.gamma !== undefined ? [p.gamma] : GRID
  let best: { a: number; b: number; g: number; r: Run } | undefined
  for (const a of as)
    for (const b of bs)
      for (const g of gs) {
        const r = run(y, m, a, b, g)
        if (!best || r.sse < best.r.sse) best = { a, b, g, r }
      }
  const { a, b, g, r } = best!
  return {
    kind: 'holt_winters',
    alpha: a,
    beta: b,
    gamma: g,
    seasonLength: m,
    level: r.level,
    trend: r.trend,
    season: r.season,
    n: y.length,
  }
}

/** The forecast `h` (>= 1) steps after the last observation. */
export function holtWintersForecast(m: HoltWintersModel, h: number): number {
  return m.level + h * m.trend + m.season[(m.n + h - 1) % m.seasonLength]
}

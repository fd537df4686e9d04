import { describe, expect, test } from 'bun:test'
import { robustScore, trainRobustZ } from './anomaly'
import { type Dataset, binOf, profile, psi, rng } from './data'
import { checkFit, checkScale } from './finite'
import { holtWintersForecast, trainHoltWinters } from './holtwinters'
import { ALGORITHMS, canonicalAlgorithm, predict, resolveHyperparameters, train } from './index'
import { kmeansDistances, trainKMeans } from './kmeans'
import { linearPredict, trainLinear } from './linear'
import { logisticProbability, trainLogistic } from './logistic'
import { auc, classification, regression } from './metrics'

// mtcars (R's datasets): weight in 1000 lbs, transmission (1 manual), miles per gallon.
const WT = [
  2.62, 2.875, 2.32, 3.215, 3.44, 3.46, 3.57, 3.19, 3.15, 3.44, 3.44, 4.07, 3.73, 3.78, 5.25, 5.424, 5.345,
  2.2, 1.615, 1.835, 2.465, 3.52, 3.435, 3.84, 3.845, 1.935, 2.14, 1.513, 3.17, 2.77, 3.57, 2.78,
]
const AM = [1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1]
const MPG = [
  21, 21, 22.8, 21.4, 18.7, 18.1, 14.3, 24.4, 22.8, 19.2, 17.8, 16.4, 17.3, 15.2, 10.4, 10.4, 14.7, 32.4,
  30.4, 33.9, 21.5, 15.5, 15.2, 13.3, 19.2, 27.3, 26, 30.4, 15.8, 19.7, 15, 21.4,
]

const ds = (rows: number[][], y: number[], features?: string[]): Dataset => {
  const d = rows[0]?.length ?? 0
  return {
    x: Float64Array.from(rows.flat()),
    y: Float64Array.from(y),
    n: rows.length,
    d,
    features: features ?? Array.from({ length: d }, (_, i) => `f${i}`),
  }
}

describe('logistic regression', () => {
  test('matches R glm(am ~ wt, binomial, mtcars): intercept 12.040, wt -4.024', () => {
    const m = trainLogistic(
      ds(
        WT.map((w) => [w]),
        AM,
      ),
      { maxIterations: 100, l2: 0, tolerance: 1e-10 },
    )
    const slope = m.weights[0] / m.std[0]
    const intercept = m.bias - slope * m.mean[0]
    expect(intercept).toBeCloseTo(12.04, 2)
    expect(slope).toBeCloseTo(-4.024, 2)
    expect(logisticProbability(m, [2])).toBeCloseTo(1 / (1 + Math.exp(-(12.04 - 4.024 * 2))), 2)
  })

  test('a larger L2 penalty shrinks the weight', () => {
    const data = () =>
      ds(
        WT.map((w) => [w]),
        AM,
      )
    const free = trainLogistic(data(), { maxIterations: 100, l2: 0, tolerance: 1e-10 })
    const tight = trainLogistic(data(), { maxIterations: 100, l2: 0.5, tolerance: 1e-10 })
    expect(Math.abs(tight.weights[0])).toBeLessThan(Math.abs(free.weights[0]) / 2)
  })
})

describe('linear and ridge regression', () => {
  test('OLS matches lm(mpg ~ wt, mtcars): 37.285 - 5.344 wt', () => {
    const m = trainLinear(
      ds(
        WT.map((w) => [w]),
        MPG,
      ),
      0,
      'linear_regression',
    )
    expect(m.bias).toBeCloseTo(37.285, 2)
    expect(m.weights[0]).toBeCloseTo(-5.344, 2)
    expect(m.residualStd).toBeCloseTo(3.046, 2) // R's residual standard error
    expect(linearPredict(m, [3])).toBeCloseTo(37.285 - 5.344 * 3, 1)
  })

  test('ridge shrinks the standardized slope to Sxy / (Sxx + l2)', () => {
    const data = ds(
      WT.map((w) => [w]),
      MPG,
    )
    const n = WT.length
    const mean = WT.reduce((a, b) => a + b) / n
    const sd = Math.sqrt(WT.reduce((a, w) => a + (w - mean) ** 2, 0) / n)
    const ym = MPG.reduce((a, b) => a + b) / n
    const z = WT.map((w) => (w - mean) / sd)
    const sxy = z.reduce((a, v, i) => a + v * (MPG[i] - ym), 0)
    const sxx = z.reduce((a, v) => a + v * v, 0)
    const m = trainLinear(data, 10, 'ridge_regression')
    expect(m.weights[0] * sd).toBeCloseTo(sxy / (sxx + 10), 6)
  })
})

describe('k-means', () => {
  test('finds three separated blobs and assigns new points to the right one', () => {
    const r = rng(7)
    const centers = [
      [0, 0],
      [10, 10],
      [-10, 10],
    ]
    const rows: number[][] = []
    for (let i = 0; i < 300; i++) {
      const c = centers[i % 3]
      rows.push([c[0] + r() - 0.5, c[1] + r() - 0.5])
    }
    const m = trainKMeans(ds(rows, new Array(300).fill(0)), {
      k: 3,
      maxIterations: 100,
      tolerance: 1e-6,
      seed: 1,
    })
    expect(m.sizes.sort()).toEqual([100, 100, 100])
    const near = (p: number[]) => {
      const d = kmeansDistances(m, p)
      return d.indexOf(Math.min(...d))
    }
    expect(near([0.2, -0.1])).toBe(near([0, 0]))
    expect(near([9.8, 10.1])).not.toBe(near([0, 0]))
    expect(near([-9.8, 10.1])).not.toBe(near([9.8, 10.1]))
  })
})

describe('robust z-score', () => {
  test('median 3, MAD 1: the score of 100 is 0.6745 x 97', () => {
    const m = trainRobustZ(ds([[1], [2], [3], [4], [100]], [0, 0, 0, 0, 0]), 3.5)
    expect(m.median).toEqual([3])
    expect(m.mad).toEqual([1])
    expect(robustScore(m, [100])).toBeCloseTo(65.4265, 4)
    expect(robustScore(m, [4])).toBeCloseTo(0.6745, 4)
  })
})

describe('Holt-Winters', () => {
  test('the first update follows the additive recurrences', () => {
    // m = 2: level0 = 2, trend0 = (3 - 2) / 2 = 0.5, season = [-1, 1]; then y2 = 2.
    const m = trainHoltWinters([1, 3, 2, 4], { seasonLength: 2, alpha: 0.5, beta: 0.5, gamma: 0.5 })
    // t=2: level = .5(2+1) + .5(2.5) = 2.75, trend = .5(.75) + .5(.5) = .625, s0 = .5(2-2.75) + .5(-1) = -.875
    // t=3: s = 1, level = .5(4-1) + .5(2.75+.625) = 3.1875, trend = .5(.4375) + .5(.625) = .53125,
    //      s1 = .5(4-3.1875) + .5(1) = .90625
    expect(m.level).toBeCloseTo(3.1875, 10)
    expect(m.trend).toBeCloseTo(0.53125, 10)
    expect(m.season).toEqual([-0.875, 0.90625])
    expect(holtWintersForecast(m, 1)).toBeCloseTo(3.1875 + 0.53125 - 0.875, 10)
  })

  test('fitted on a noisy weekly series it forecasts the next two weeks within 5%', () => {
    const r = rng(3)
    const week = [0, 5, 10, 8, 6, 20, 30]
    const y = Array.from({ length: 84 }, (_, t) => 100 + 0.5 * t + week[t % 7] + (r() - 0.5) * 2)
    const m = trainHoltWinters(y.slice(0, 70), { seasonLength: 7 })
    const errs = y.slice(70).map((v, i) => Math.abs(holtWintersForecast(m, i + 1) - v) / v)
    expect(Math.max(...errs)).toBeLessThan(0.05)
  })
})

describe('metrics', () => {
  test('accuracy, precision, recall, f1 and AUC of a known confusion', () => {
    const truth = [1, 1, 1, 0, 0, 0, 1, 0]
    const prob = [0.9, 0.8, 0.3, 0.6, 0.2, 0.1, 0.7, 0.4]
    const m = classification(truth, prob)
    // tp 3 (0.9, 0.8, 0.7), fn 1 (0.3), fp 1 (0.6), tn 3
    expect(m.accuracy).toBe(0.75)
    expect(m.precision).toBe(0.75)
    expect(m.recall).toBe(0.75)
    expect(m.f1).toBe(0.75)
    // 16 positive-negative pairs, 14 ordered right (0.3 < 0.6 and 0.3 < 0.4 are wrong)
    expect(m.auc).toBeCloseTo(14 / 16, 10)
    expect(auc([0, 1], [0.5, 0.5])).toBe(0.5)
  })

  test('rmse, mae and r2', () => {
    const m = regression([1, 2, 3, 4], [1, 2, 3, 5])
    expect(m.rmse).toBeCloseTo(0.5, 10)
    expect(m.mae).toBe(0.25)
    expect(m.r2).toBeCloseTo(1 - 1 / 5, 10)
  })

  test('PSI is 0 for the training distribution and large for a shifted one', () => {
    const r = rng(1)
    const rows = Array.from({ length: 5000 }, () => [r()])
    const [p] = profile(ds(rows, new Array(5000).fill(0)))
    const same = new Array(p.edges.length + 1).fill(0)
    const shifted = new Array(p.edges.length + 1).fill(0)
    for (let i = 0; i < 5000; i++) {
      same[binOf(p.edges, r())]++
      shifted[binOf(p.edges, r() * 0.5 + 0.5)]++
    }
    expect(psi(p.shares, same)).toBeLessThan(0.02)
    expect(psi(p.shares, shifted)).toBeGreaterThan(0.25)
  })
})

describe('train and predict through the registry', () => {
  test('aliases, hyperparameter validation and defaults', () => {
    expect(canonicalAlgorithm('CLASSIFICATION', 'LogisticRegression')).toBe('logistic_regression')
    expect(canonicalAlgorithm('CLASSIFICATION', 'kmeans')).toBeUndefined()
    for (const [type, list] of Object.entries(ALGORITHMS))
      for (const a of list) expect(canonicalAlgorithm(type as never, a)).toBe(a)
    const ok = resolveHyperparameters('kmeans', { k: 5 })
    expect(ok.problems).toEqual([])
    expect(ok.values).toMatchObject({ k: 5, maxIterations: 100, testSplit: 0.2 })
    const bad = resolveHyperparameters('kmeans', { k: 1.5, depth: 3, tolerance: -1 })
    expect(bad.problems.map((p) => p.field).sort()).toEqual([
      'body.hyperparameters.depth',
      'body.hyperparameters.k',
      'body.hyperparameters.tolerance',
    ])
  })

  test('a classifier on a separable synthetic set reaches 95% holdout accuracy and answers its classes', () => {
    const r = rng(11)
    const rows: number[][] = []
    const y: number[] = []
    for (let i = 0; i < 4000; i++) {
      const a = r() * 10
      const b = r() * 10
      rows.push([a, b])
      y.push(a + b > 10 ? 1 : 0)
    }
    const { values } = resolveHyperparameters('logistic_regression', {})
    const { artifact, metrics } = train({
      type: 'CLASSIFICATION',
      algorithm: 'logistic_regression',
      hyperparameters: values,
      data: ds(rows, y, ['sessions', 'level']),
      classes: ['stays', 'churns'],
    })
    expect(metrics.accuracy).toBeGreaterThanOrEqual(0.95)
    expect(metrics.auc).toBeGreaterThanOrEqual(0.99)
    expect(metrics.testRows).toBe(800)
    expect(predict(artifact, [9, 9]).prediction).toBe('churns')
    const p = predict(artifact, [1, 1])
    expect(p.prediction).toBe('stays')
    expect(p.probability).toBeLessThan(0.05)
    expect(p.confidence).toBeGreaterThan(0.95)
  })
})

describe('finite fits', () => {
  test('a fit whose metrics or model hold a NaN or an Infinity throws, naming it; a finite one passes', () => {
    const artifact = { model: { weights: [1, 2], bias: 0 }, profile: [{ edges: [0, 1] }] }
    expect(() => checkFit({ artifact, metrics: { rmse: 1, r2: 0.5 } })).not.toThrow()
    expect(() => checkFit({ artifact, metrics: { rmse: Number.NaN, r2: 0.5 } })).toThrow(
      'the fit is not usable (metrics.rmse = NaN)',
    )
    expect(() =>
      checkFit({ artifact: { model: { weights: [1, Number.POSITIVE_INFINITY] } }, metrics: { rmse: 1 } }),
    ).toThrow('(model.model.weights[1] = Infinity)')
  })

  test('values whose sum or spread overflows are refused before fitting, naming the feature', () => {
    const x = Float64Array.from([1e308, 1e308, 1, 2])
    const data: Dataset = { x, y: new Float64Array(4), n: 4, d: 1, features: ['gold'] }
    expect(() => checkScale(data)).toThrow("feature 'gold' has values too large to fit")
    expect(() => checkScale({ ...data, x: Float64Array.from([1, 2, 3, 4]) })).not.toThrow()
    // Robust z-scores take any finite value.
    const { values } = resolveHyperparameters('robust_zscore', {})
    const out = train({
      type: 'ANOMALY_DETECTION',
      algorithm: 'robust_zscore',
      hyperparameters: values,
      data,
    })
    expect(out.metrics.rows).toBe(4)
  })
})

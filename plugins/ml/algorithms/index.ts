import { type RobustZModel, robustScore, trainRobustZ } from './anomaly'
import { type Dataset, type FeatureProfile, profile, split } from './data'
import { checkFit, checkScale } from './finite'
import { type HoltWintersModel, holtWintersForecast, trainHoltWinters } from './holtwinters'
import { type KMeansModel, kmeansDistances, silhouette, trainKMeans } from './kmeans'
import { type LinearModel, linearPredict, trainLinear } from './linear'
import { type LogisticModel, logisticProbability, trainLogistic } from './logistic'
import { classification, regression } from './metrics'

export const MODEL_TYPES = [
  'CLASSIFICATION',
  'REGRESSION',
  'CLUSTERING',
  'ANOMALY_DETECTION',
  'TIME_SERIES',
] as const
export type ModelType = (typeof MODEL_TYPES)[number]

/** Built-in algorithms per model type; the first is the default when a model names none. */
export const ALGORITHMS: Record<ModelType, readonly string[]> = {
  CLASSIFICATION: ['logistic_regression'],
  REGRESSION: ['linear_regression', 'ridge_regression'],
  CLUSTERING: ['kmeans'],
  ANOMALY_DETECTION: ['robust_zscore'],
  TIME_SERIES: ['holt_winters'],
}

const ALIASES: Record<string, string> = {
  logisticregression: 'logistic_regression',
  logistic: 'logistic_regression',
  logit: 'logistic_regression',
  linearregression: 'linear_regression',
  linear: 'linear_regression',
  ols: 'linear_regression',
  ridgeregression: 'ridge_regression',
  ridge: 'ridge_regression',
  kmeans: 'kmeans',
  robustzscore: 'robust_zscore',
  modifiedzscore: 'robust_zscore',
  zscore: 'robust_zscore',
  holtwinters: 'holt_winters',
  tripleexponentialsmoothing: 'holt_winters',
}

/**
 * The built-in algorithm a name stands for, of any type (any case and separators). Own entries
 * only: 'constructor' is no algorithm.
 */
export function builtinAlgorithm(name: string): string | undefined {
  const key = name.toLowerCase().replace(/[^a-z0-9]/g, '')
  return Object.hasOwn(ALIASES, key) ? ALIASES[key] : undefined
}

/** The canonical name of `name` when it is a built-in algorithm of `type` (any case and separators). */
export function canonicalAlgorithm(type: ModelType, name: string): string | undefined {
  const c = builtinAlgorithm(name)
  return c && ALGORITHMS[type].includes(c) ? c : undefined
}

/** Why a model with an algorithm trained elsewhere (a registry entry) is not trained here, and what to do. */
export function notTrainedHere(
  modelId: string,
  type: ModelType,
  model: { algorithm: string; framework: string },
): string {
  return (
    `model '${modelId}' uses '${model.algorithm}' (framework ${model.framework}), which liveops does not train in process: ` +
    `train it where it was built and deploy it with POST /api/ml-models/${modelId}/deploy {"servingEndpoint": "https://..."}, ` +
    `or set a built-in ${type} algorithm (${ALGORITHMS[type].join(', ')}) to train it here`
  )
}

interface ParamSpec {
  min: number
  max: number
  integer?: boolean
  /** Absent: the parameter is optional and has no default (Holt-Winters fits it). */
  default?: number
  doc: string
}

const COMMON: Record<string, ParamSpec> = {
  testSplit: { min: 0.05, max: 0.5, default: 0.2, doc: 'share of rows held out for the metrics' },
  seed: { min: 0, max: 2 ** 31 - 1, integer: true, default: 42, doc: 'seed of the split and initialization' },
}

/** Every hyperparameter each algorithm takes, with its range and default. */
export const HYPERPARAMETERS: Record<string, Record<string, ParamSpec>> = {
  logistic_regression: {
    ...COMMON,
    maxIterations: { min: 1, max: 1000, integer: true, default: 100, doc: 'Newton steps at most' },
    l2: { min: 0, max: 100, default: 0.0001, doc: 'L2 penalty per row on standardized weights' },
    tolerance: { min: 1e-12, max: 1, default: 1e-6, doc: 'stop when no weight moves more' },
    threshold: {
      min: 0.01,
      max: 0.99,
      default: 0.5,
      doc: 'probability from which the answer is the positive class',
    },
  },
  linear_regression: {
    ...COMMON,
    l2: {
      min: 0,
      max: 1e9,
      default: 0,
      doc: 'ridge penalty on standardized weights (0: ordinary least squares)',
    },
  },
  ridge_regression: {
    ...COMMON,
    l2: { min: 0, max: 1e9, default: 1, doc: 'ridge penalty on standardized weights' },
  },
  kmeans: {
    ...COMMON,
    k: { min: 2, max: 100, integer: true, default: 3, doc: 'clusters' },
    maxIterations: { min: 1, max: 1000, integer: true, default: 100, doc: 'Lloyd iterations at most' },
    tolerance: { min: 1e-12, max: 1, default: 1e-6, doc: 'stop when no centroid moves more' },
  },
  robust_zscore: {
    ...COMMON,
    threshold: { min: 0.1, max: 100, default: 3.5, doc: 'modified z-score above which a row is an anomaly' },
  },
  holt_winters: {
    testSplit: { ...COMMON.testSplit, doc: 'share of the last points held out for the metrics' },
    seasonLength: { min: 2, max: 366, integer: true, default: 7, doc: 'points per season' },
    alpha: { min: 0, max: 1, doc: 'level smoothing; absent: fitted' },
    beta: { min: 0, max: 1, doc: 'trend smoothing; absent: fitted' },
    gamma: { min: 0, max: 1, doc: 'season smoothing; absent: fitted' },
  },
}

/**
 * The hyperparameters with defaults filled in, or the problems found, each naming
 * `body.hyperparameters.<name>`.
 */
export function resolveHyperparameters(
  algorithm: string,
  given: Record<string, number>,
): { values: Record<string, number>; problems: Array<{ field: string; reason: string }> } {
  // Own entries only: '__proto__' or 'constructor' is no hyperparameter.
  const specs = Object.hasOwn(HYPERPARAMETERS, algorithm) ? HYPERPARAMETERS[algorithm] : {}
  const problems: Array<{ field: string; reason: string }> = []
  const values: Record<string, number> = {}
  for (const [k, v] of Object.entries(given)) {
    const s = Object.hasOwn(specs, k) ? specs[k] : undefined
    const field = `body.hyperparameters.${k}`
    if (!s)
      problems.push({ field, reason: `unknown for ${algorithm}; known: ${Object.keys(specs).join(', ')}` })
    else if (typeof v !== 'number' || !Number.isFinite(v))
      problems.push({ field, reason: 'must be a finite number' })
    else if (v < s.min || v > s.max) problems.push({ field, reason: `must be between ${s.min} and ${s.max}` })
    else if (s.integer && !Number.isInteger(v)) problems.push({ field, reason: 'must be an integer' })
    else values[k] = v
  }
  for (const [k, s] of Object.entries(specs))
    if (values[k] === undefined && s.default !== undefined) values[k] = s.default
  return { values, problems }
}

export type Inner = LogisticModel | LinearModel | KMeansModel | RobustZModel | HoltWintersModel

/** What a training run stores as a model version. */
export interface Artifact {
  type: ModelType
  algorithm: string
  features: string[]
  /** Classification: the label values read as class 0 and class 1. */
  classes?: [string, string]
  threshold?: number
  /** Regression: holdout r2, the confidence reported with each prediction. */
  r2?: number
  /** Time series: the holdout's mean absolute percentage error. */
  mape?: number
  model: Inner
  profile: FeatureProfile[]
}

export type Metrics = Record<string, number>

export interface TrainInput {
  type: ModelType
  algorithm: string
  hyperparameters: Record<string, number>
  data: Dataset
  classes?: [string, string]
}

/**
 * Trains on a seeded split and scores the holdout; the model kept is the one fitted on the
 * training share (what the metrics describe). Time series hold out the last points instead.
 * Values too large to fit, and a fit that is not finite, throw: a version is never stored with
 * a NaN or an Infinity.
 */
export function train(
  input: TrainInput,
  progress: (share: number) => void = () => undefined,
): { artifact: Artifact; metrics: Metrics } {
  // The fits that standardize by mean and spread (robust z-scores use medians, and take any finite value).
  if (input.algorithm !== 'robust_zscore')
    checkScale(
      input.data,
      input.type === 'TIME_SERIES' ? 'series' : input.type === 'REGRESSION' ? 'label' : undefined,
    )
  const out = fit(input, progress)
  checkFit(out)
  return out
}

function fit(input: TrainInput, progress: (share: number) => void): { artifact: Artifact; metrics: Metrics } {
  const h = input.hyperparameters
  const { type, algorithm, data } = input
  const base = { type, algorithm, features: data.features }
  if (type === 'TIME_SERIES') {
    const y = data.y
    const test = Math.max(1, Math.round(y.length * h.testSplit))
    const fit = trainHoltWinters(y.subarray(0, y.length - test), {
      seasonLength: h.seasonLength,
      alpha: h.alpha,
      beta: h.beta,
      gamma: h.gamma,
    })
    const truth = y.subarray(y.length - test)
    const pred = Array.from(truth, (_, i) => holtWintersForecast(fit, i + 1))
    const r = regression(truth, pred)
    let ape = 0
    let counted = 0
    truth.forEach((t, i) => {
      if (t !== 0) {
        ape += Math.abs((t - pred[i]) / t)
        counted++
      }
    })
    const mape = counted ? ape / counted : 0
    progress(0.8)
    // Served forecasts continue from the whole series, with the parameters the holdout chose.
    const model = trainHoltWinters(y, {
      seasonLength: h.seasonLength,
      alpha: fit.alpha,
      beta: fit.beta,
      gamma: fit.gamma,
    })
    return {
      artifact: { ...base, model, mape, profile: [] },
      metrics: { ...r, mape, alpha: fit.alpha, beta: fit.beta, gamma: fit.gamma, rows: y.length },
    }
  }
  if (data.n < 2) throw new Error(`the training set has ${data.n} rows; at least 2 are needed`)
  const prof = profile(data)
  const { train: tr, test } = split(data, h.testSplit, h.seed)
  const rows = { rows: data.n, trainRows: tr.n, testRows: test.n }
  switch (algorithm) {
    case 'logistic_regression': {
      const model = trainLogistic(
        tr,
        { maxIterations: h.maxIterations, l2: h.l2, tolerance: h.tolerance },
        (s) => progress(0.95 * s),
      )
      const prob = Array.from({ length: test.n }, (_, i) =>
        logisticProbability(model, test.x.subarray(i * test.d)),
      )
      return {
        artifact: {
          ...base,
          model,
          classes: input.classes ?? ['0', '1'],
          threshold: h.threshold,
          profile: prof,
        },
        metrics: { ...classification(test.y, prob, h.threshold), ...rows, iterations: model.iterations },
      }
    }
    case 'linear_regression':
    case 'ridge_regression': {
      const model = trainLinear(tr, h.l2, algorithm, (s) => progress(0.95 * s))
      const pred = Array.from({ length: test.n }, (_, i) => linearPredict(model, test.x.subarray(i * test.d)))
      const m = regression(test.y, pred)
      return { artifact: { ...base, model, r2: m.r2, profile: prof }, metrics: { ...m, ...rows } }
    }
    case 'kmeans': {
      const model = trainKMeans(tr, {
        k: h.k,
        maxIterations: h.maxIterations,
        tolerance: h.tolerance,
        seed: h.seed,
      })
      progress(0.9)
      let inertia = 0
      for (let i = 0; i < test.n; i++)
        inertia += Math.min(...kmeansDistances(model, test.x.subarray(i * test.d)))
      return {
        artifact: { ...base, model, profile: prof },
        metrics: {
          inertia: test.n ? inertia / test.n : 0,
          silhouette: silhouette(model, test),
          ...rows,
          iterations: model.iterations,
        },
      }
    }
    case 'robust_zscore': {
      const model = trainRobustZ(tr, h.threshold)
      const scores = Array.from({ length: test.n }, (_, i) => robustScore(model, test.x.subarray(i * test.d)))
      const flagged = scores.map((s) => (s > h.threshold ? 1 : 0))
      const metrics: Metrics = {
        anomalyRate: flagged.reduce<number>((a, b) => a + b, 0) / (test.n || 1),
        ...rows,
      }
      // With a label (1 = anomaly) the flags are scored like a classifier.
      if (input.classes)
        Object.assign(
          metrics,
          classification(
            test.y,
            scores.map((s) => s / (2 * h.threshold)),
            0.5,
          ),
        )
      return { artifact: { ...base, model, classes: input.classes, profile: prof }, metrics }
    }
  }
  throw new Error(`no trainer for algorithm '${algorithm}'`)
}

export interface Prediction {
  prediction: string
  probability: number
  confidence: number
  /** Regression and time series: the number itself; anomaly: the score; clustering: the squared distance. */
  value?: number
}

/**
 * One prediction from a stored artifact and a feature vector in the artifact's feature order
 * (time series: the vector is [horizon]). What probability and confidence mean per type is
 * documented on the predict route.
 */
export function predict(a: Artifact, v: ArrayLike<number>): Prediction {
  const m = a.model
  switch (m.kind) {
    case 'logistic_regression': {
      const p = logisticProbability(m, v)
      const positive = p >= (a.threshold ?? 0.5)
      const classes = a.classes ?? ['0', '1']
      return {
        prediction: positive ? classes[1] : classes[0],
        probability: p,
        confidence: positive ? p : 1 - p,
      }
    }
    case 'linear_regression':
    case 'ridge_regression': {
      const value = linearPredict(m, v)
      const c = Math.min(1, Math.max(0, a.r2 ?? 0))
      return { prediction: String(value), probability: c, confidence: c, value }
    }
    case 'kmeans': {
      const d = kmeansDistances(m, v)
      let best = 0
      for (let i = 1; i < d.length; i++) if (d[i] < d[best]) best = i
      // Soft assignment by inverse squared distance: the share of the nearest centroid.
      const inv = d.map((x) => 1 / Math.max(x, 1e-12))
      const p = inv[best] / inv.reduce((s, x) => s + x, 0)
      return { prediction: String(best), probability: p, confidence: p, value: d[best] }
    }
    case 'robust_zscore': {
      const s = robustScore(m, v)
      const p = (s * s) / (s * s + m.threshold * m.threshold)
      const anomaly = s > m.threshold
      const labels = a.classes ?? ['normal', 'anomaly']
      return {
        prediction: anomaly ? labels[1] : labels[0],
        probability: p,
        confidence: anomaly ? p : 1 - p,
        value: s,
      }
    }
    case 'holt_winters': {
      const value = holtWintersForecast(m, v[0])
      const c = Math.min(1, Math.max(0, 1 - (a.mape ?? 1)))
      return { prediction: String(value), probability: c, confidence: c, value }
    }
  }
}

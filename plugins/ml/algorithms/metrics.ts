/** Holdout metrics. Pure functions over plain arrays so tests can check them against known values. */

export interface ClassificationMetrics {
  accuracy: number
  precision: number
  recall: number
  f1: number
  auc: number
}

/** Binary metrics of predicted probabilities (class 1 when >= threshold) against 0/1 truths. */
export function classification(
  truth: ArrayLike<number>,
  prob: ArrayLike<number>,
  threshold = 0.5,
): ClassificationMetrics {
  let tp = 0
  let fp = 0
  let tn = 0
  let fn = 0
  for (let i = 0; i < truth.length; i++) {
    const p = prob[i] >= threshold
    const t = truth[i] >= 0.5
    if (p && t) tp++
    else if (p) fp++
    else if (t) fn++
    else tn++
  }
  const precision = tp + fp ? tp / (tp + fp) : 0
  const recall = tp + fn ? tp / (tp + fn) : 0
  return {
    accuracy: truth.length ? (tp + tn) / truth.length : 0,
    precision,
    recall,
    f1: precision + recall ? (2 * precision * recall) / (precision + recall) : 0,
    auc: auc(truth, prob),
  }
}

/**
 * Area under the ROC curve by the rank-sum (Mann-Whitney U) formula, ties sharing their mean
 * rank; 0.5 when one class is absent.
 */
export function auc(truth: ArrayLike<number>, score: ArrayLike<number>): number {
  const n = truth.length
  const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => score[a] - score[b])
  let pos = 0
  let rankSum = 0
  for (let i = 0; i < n; ) {
    let j = i
    while (j + 1 < n && score[order[j + 1]] === score[order[i]]) j++
    const rank = (i + j) / 2 + 1
    for (let k = i; k <= j; k++)
      if (truth[order[k]] >= 0.5) {
        pos++
        rankSum += rank
      }
    i = j + 1
  }
  const neg = n - pos
  if (!pos || !neg) return 0.5
  return (rankSum - (pos * (pos + 1)) / 2) / (pos * neg)
}

export interface RegressionMetrics {
  rmse: number
  mae: number
  r2: number
}

export function regression(truth: ArrayLike<number>, pred: ArrayLike<number>): RegressionMetrics {
  const n = truth.length
  let mean = 0
  for (let i = 0; i < n; i++) mean += truth[i]
  mean /= n || 1
  let sse = 0
  let sst = 0
  let abs = 0
  for (let i = 0; i < n; i++) {
    const e = truth[i] - pred[i]
    sse += e * e
    abs += Math.abs(e)
    sst += (truth[i] - mean) ** 2
  }
  return {
    rmse: n ? Math.sqrt(sse / n) : 0,
    mae: n ? abs / n : 0,
    r2: sst > 0 ? 1 - sse / sst : sse === 0 ? 1 : 0,
  }
}

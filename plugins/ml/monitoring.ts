import type { Bus } from '../../core/bus'
import { type Db, fromJson, iso, newId } from '../../core/db'
import { Conflict, NotFound } from '../../core/http'
import type { Artifact, Metrics } from './algorithms'
import { binOf, psi } from './algorithms/data'
import { type PredictionLog, bucketValueUs } from './log'
import { readMetrics } from './model-rows'
import type { Stats } from './schema'
import type { ModelsStore } from './store'

const DAY = 86_400_000

export interface MonitoringConfig {
  /** Feedback needed before an accuracy drop counts. */
  minFeedback: number
  /** Recent predictions compared with the training distribution. */
  psiSample: number
  /** Predictions needed before a feature shift counts. */
  minPredictions: number
  /** An alert of one kind and severity is raised again only after this long. */
  alertCooldownMs: number
}

type Severity = 'medium' | 'high' | 'critical'

/** Upstream's reading: more than 5, 10, 15 points below the training accuracy. */
export function accuracySeverity(drop: number | null): Severity | null {
  if (drop === null) return null
  return drop > 0.15 ? 'critical' : drop > 0.1 ? 'high' : drop > 0.05 ? 'medium' : null
}

/** PSI 0.1 to 0.25 a moderate shift (medium), above 0.25 major (high), above 0.5 critical. */
export function psiSeverity(v: number): Severity | null {
  return v > 0.5 ? 'critical' : v > 0.25 ? 'high' : v > 0.1 ? 'medium' : null
}

/** Whether feedback matches: the same class; numbers within 10% of the actual (or 1e-9 of 0). */
export function matches(prediction: string, actual: string | number | boolean): boolean {
  const a = typeof actual === 'boolean' ? String(actual) : actual
  const p = Number(prediction)
  const n = typeof a === 'number' ? a : Number(a)
  if (prediction === String(a)) return true
  if (Number.isFinite(p) && Number.isFinite(n) && typeof a === 'number')
    return Math.abs(p - n) <= Math.max(1e-9, Math.abs(n) * 0.1)
  return false
}

const SEVERITY_RANK = { medium: 1, high: 2, critical: 3 }

export function monitoring(
  db: Db,
  models: ModelsStore,
  log: PredictionLog,
  bus: Bus,
  config: MonitoringConfig,
) {
  async function trainingMetrics(
    modelId: string,
    version: number | null,
  ): Promise<{ metrics: Metrics; artifact?: Artifact }> {
    if (version === null) return { metrics: {} }
    const v = await models.version(modelId, version)
    return v
      ? {
          metrics: readMetrics(v.metrics),
          artifact: fromJson<Artifact | undefined>(v.artifact, undefined),
        }
      : { metrics: {} }
  }

  async function psiOf(
    modelId: string,
    version: number,
    artifact: Artifact | undefined,
  ): Promise<Record<string, number>> {
    if (!artifact?.profile.length) return {}
    const rows = await db.all<{ features: string }>(
      'SELECT features FROM ml_predictions WHERE model_id = ? AND served_by = ? AND version = ? ORDER BY created_at DESC LIMIT ?',
      [modelId, modelId, version, config.psiSample],
    )
    if (rows.length < config.minPredictions) return {}
    const counts = artifact.profile.map((p) => new Array(p.edges.length + 1).fill(0))
    for (const r of rows) {
      const v = fromJson<number[]>(r.features, [])
      artifact.profile.forEach((p, j) => {
        if (typeof v[j] === 'number') counts[j][binOf(p.edges, v[j])]++
      })
    }
    return Object.fromEntries(
      artifact.profile.map((p, j) => [p.feature, Math.round(psi(p.shares, counts[j]) * 10000) / 10000]),
    )
  }

  async function stats(modelId: string, days: number, now = Date.now()): Promise<Stats> {
    await log.flush()
    const row = await models.row(modelId)
    const from = Math.floor(now / DAY) * DAY - (days - 1) * DAY
    const daily = await db.all<{
      day: number
      arm: string
      served_by: string
      predictions: number
      feedback: number
      correct: number
    }>(
      'SELECT day, arm, served_by, predictions, feedback, correct FROM ml_daily WHERE model_id = ? AND day >= ?',
      [modelId, from],
    )
    const perDay = new Map<number, number>()
    const arms: Stats['arms'] = {}
    let predictions = 0
    let feedback = 0
    let correct = 0
    for (const d of daily) {
      const day = Number(d.day)
      perDay.set(day, (perDay.get(day) ?? 0) + Number(d.predictions))
      arms[d.arm] ??= {
        modelId: d.served_by,
        predictions: 0,
        feedback: 0,
        correct: 0,
        accuracy: null,
      }
      const a = arms[d.arm]
      a.predictions += Number(d.predictions)
      a.feedback += Number(d.feedback)
      a.correct += Number(d.correct)
      predictions += Number(d.predictions)
      feedback += Number(d.feedback)
      correct += Number(d.correct)
    }
    for (const a of Object.values(arms)) a.accuracy = a.feedback ? a.correct / a.feedback : null
    const hist = await db.all<{ bucket: number; n: number }>(
      'SELECT bucket, SUM(n) AS n FROM ml_latency WHERE model_id = ? AND day >= ? GROUP BY bucket ORDER BY bucket',
      [modelId, from],
    )
    const total = hist.reduce((s, h) => s + Number(h.n), 0)
    const pct = (q: number) => {
      let seen = 0
      for (const h of hist) {
        seen += Number(h.n)
        if (seen >= Math.ceil(total * q)) return Math.round(bucketValueUs(Number(h.bucket))) / 1000
      }
      return 0
    }
    const deployed = row.deployed_version === null ? null : Number(row.deployed_version)
    const { metrics, artifact } = await trainingMetrics(modelId, deployed)
    const trainingAccuracy = typeof metrics.accuracy === 'number' ? metrics.accuracy : null
    // The deployed version's own feedback: an A/B baseline's or a canary's answers are not its accuracy.
    const own = daily.filter((d) => d.served_by === modelId)
    const ownFeedback = own.reduce((s, d) => s + Number(d.feedback), 0)
    const ownCorrect = own.reduce((s, d) => s + Number(d.correct), 0)
    const recentAccuracy = ownFeedback >= config.minFeedback ? ownCorrect / ownFeedback : null
    const accuracyDrop =
      trainingAccuracy !== null && recentAccuracy !== null
        ? Math.round((trainingAccuracy - recentAccuracy) * 10000) / 10000
        : null
    const psiByFeature = deployed === null ? {} : await psiOf(modelId, deployed, artifact)
    const worst = Math.max(0, ...Object.values(psiByFeature))
    const alerts = await db.all<{
      id: string
      kind: string
      severity: string
      value: number
      details: string
      created_at: number
    }>(
      'SELECT id, kind, severity, value, details, created_at FROM ml_drift_alerts WHERE model_id = ? ORDER BY created_at DESC LIMIT 20',
      [modelId],
    )
    return {
      modelId,
      days,
      predictionsPerDay: Array.from({ length: days }, (_, i) => {
        const day = from + i * DAY
        return { date: new Date(day).toISOString().slice(0, 10), predictions: perDay.get(day) ?? 0 }
      }),
      predictions,
      latencyMs: { p50: pct(0.5), p95: pct(0.95), p99: pct(0.99) },
      feedback,
      feedbackAccuracy: feedback ? correct / feedback : null,
      trainingAccuracy,
      arms,
      drift: {
        accuracyDrop,
        accuracySeverity: accuracySeverity(accuracyDrop),
        psi: psiByFeature,
        featureSeverity: psiSeverity(worst),
        alerts: alerts.map((a) => ({
          id: a.id,
          kind: a.kind as 'accuracy' | 'feature',
          severity: a.severity as Severity,
          value: Number(a.value),
          details: fromJson<Record<string, unknown>>(a.details, {}),
          createdAt: iso(a.created_at)!,
        })),
      },
    }
  }

  return {
    stats,

    /** Records the actual outcome of one prediction; a second feedback for it is refused. */
    async feedback(modelId: string, predictionId: string, actual: string | number | boolean) {
      await models.row(modelId)
      await log.flush()
      const p = await db.get<{
        prediction: string
        created_at: number
        arm: string
        served_by: string
        version: number
        actual: string | null
      }>(
        'SELECT prediction, created_at, arm, served_by, version, actual FROM ml_predictions WHERE id = ? AND model_id = ?',
        [predictionId, modelId],
      )
      if (!p) throw new NotFound(`prediction '${predictionId}' of model '${modelId}' not found`)
      const ok = matches(p.prediction, actual)
      const now = Date.now()
      await db.tx(async (tx) => {
        const n = await tx.run(
          'UPDATE ml_predictions SET actual = ?, correct = ?, feedback_at = ? WHERE id = ? AND actual IS NULL',
          [String(actual), ok ? 1 : 0, now, predictionId],
        )
        if (!n) throw new Conflict(`prediction '${predictionId}' already has feedback`)
        await tx.run(
          'UPDATE ml_daily SET feedback = feedback + 1, correct = correct + ? WHERE model_id = ? AND day = ? AND arm = ? AND served_by = ? AND version = ?',
          [ok ? 1 : 0, modelId, Math.floor(Number(p.created_at) / DAY) * DAY, p.arm, p.served_by, p.version],
        )
      })
      return { predictionId, prediction: p.prediction, actual: String(actual), correct: ok }
    },

    /**
     * Checks one model for drift and raises `model_drift` on the bus for each finding whose
     * kind has not been raised at that severity or higher within the cooldown.
     */
    async checkDrift(modelId: string, now = Date.now()) {
      const s = await stats(modelId, 7, now)
      const row = await models.row(modelId)
      const findings: Array<{
        kind: 'accuracy' | 'feature'
        severity: Severity
        value: number
        details: Record<string, unknown>
      }> = []
      if (s.drift.accuracySeverity)
        findings.push({
          kind: 'accuracy',
          severity: s.drift.accuracySeverity as Severity,
          value: s.drift.accuracyDrop!,
          details: {
            trainingAccuracy: s.trainingAccuracy,
            feedbackAccuracy: s.trainingAccuracy! - s.drift.accuracyDrop!,
          },
        })
      if (s.drift.featureSeverity) {
        const [feature, value] = Object.entries(s.drift.psi).sort((a, b) => b[1] - a[1])[0]
        findings.push({
          kind: 'feature',
          severity: s.drift.featureSeverity as Severity,
          value,
          details: { feature, psi: s.drift.psi },
        })
      }
      const raised = []
      for (const f of findings) {
        const recent = await db.all<{ severity: string }>(
          'SELECT severity FROM ml_drift_alerts WHERE model_id = ? AND kind = ? AND created_at > ?',
          [modelId, f.kind, now - config.alertCooldownMs],
        )
        if (recent.some((r) => SEVERITY_RANK[r.severity as Severity] >= SEVERITY_RANK[f.severity])) continue
        const id = newId()
        await db.run(
          'INSERT INTO ml_drift_alerts (id, model_id, kind, severity, value, details, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
          [id, modelId, f.kind, f.severity, f.value, JSON.stringify(f.details), now],
        )
        await bus.emit('model_drift', {
          model_id: modelId,
          game_id: row.game_id,
          severity: f.severity,
          ...(f.kind === 'accuracy' ? { accuracy_drop: f.value } : { psi: s.drift.psi }),
          kind: f.kind,
          name: row.name,
          version: Number(row.deployed_version),
          alert_id: id,
          at: new Date(now).toISOString(),
        })
        raised.push({ id, ...f, createdAt: new Date(now).toISOString() })
      }
      return { modelId, drift: s.drift, raised }
    },
  }
}

export type Monitoring = ReturnType<typeof monitoring>

import type { Db, Param } from '../../core/db'

const DAY = 86_400_000
/** Latency histogram buckets: round(ln(1 + us) / ln 1.05), so a percentile is within about 5%. */
const LN = Math.log(1.05)
export const latencyBucket = (us: number) => Math.round(Math.log1p(Math.max(0, us)) / LN)
export const bucketValueUs = (b: number) => Math.expm1(b * LN)

export interface LoggedPrediction {
  id: string
  modelId: string
  servedBy: string
  version: number
  arm: string
  entityId: string | null
  prediction: string
  probability: number
  features: string
  latencyUs: number
  createdAt: number
}

const COLS =
  'id, model_id, served_by, version, arm, entity_id, prediction, probability, features, latency_us, created_at'
const ROWS_PER_INSERT = 500

/**
 * Served predictions, written behind: appended to a buffer and flushed every `flushMs` (or at
 * `maxRows`) as multi-row inserts plus the day and latency rollups, in one transaction. A
 * prediction answered is visible to feedback once `flush()` resolves; a crash loses at most the
 * last interval's records, never an answer already given.
 */
export class PredictionLog {
  private buffer: LoggedPrediction[] = []
  private timer: ReturnType<typeof setTimeout> | undefined
  private flushing: Promise<void> = Promise.resolve()

  /** `sink` stores one batch: on this thread (`writeRows`) or on the log thread. */
  constructor(
    private sink: (rows: LoggedPrediction[]) => Promise<void>,
    private flushMs: number,
    private maxRows: number,
    private onError: (e: unknown) => void,
  ) {}

  add(p: LoggedPrediction): void {
    this.buffer.push(p)
    if (this.buffer.length >= this.maxRows) void this.flush()
    else this.timer ??= setTimeout(() => void this.flush(), this.flushMs)
  }

  /** Resolves when everything added so far is stored. */
  flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer)
    this.timer = undefined
    const rows = this.buffer
    this.buffer = []
    this.flushing = this.flushing.then(() => (rows.length ? this.sink(rows).catch(this.onError) : undefined))
    return this.flushing
  }

  async close(): Promise<void> {
    await this.flush()
  }
}

/** One batch of predictions and the rollups it adds, in one transaction. */
export async function writeRows(db: Db, rows: LoggedPrediction[]): Promise<void> {
  const daily = new Map<string, { p: LoggedPrediction; day: number; n: number }>()
  const lat = new Map<string, { modelId: string; day: number; bucket: number; n: number }>()
  for (const p of rows) {
    const day = Math.floor(p.createdAt / DAY) * DAY
    const dk = `${p.modelId}\n${day}\n${p.arm}\n${p.servedBy}\n${p.version}`
    const d = daily.get(dk)
    if (d) d.n++
    else daily.set(dk, { p, day, n: 1 })
    const bucket = latencyBucket(p.latencyUs)
    const lk = `${p.modelId}\n${day}\n${bucket}`
    const l = lat.get(lk)
    if (l) l.n++
    else lat.set(lk, { modelId: p.modelId, day, bucket, n: 1 })
  }
  await db.tx(async (tx) => {
    for (let i = 0; i < rows.length; i += ROWS_PER_INSERT) {
      const chunk = rows.slice(i, i + ROWS_PER_INSERT)
      const args: Param[] = []
      for (const p of chunk)
        args.push(
          p.id,
          p.modelId,
          p.servedBy,
          p.version,
          p.arm,
          p.entityId,
          p.prediction,
          p.probability,
          p.features,
          p.latencyUs,
          p.createdAt,
        )
      await tx.run(
        `INSERT INTO ml_predictions (${COLS}) VALUES ${chunk.map(() => '(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)').join(', ')} ON CONFLICT DO NOTHING`,
        args,
      )
    }
    for (const { p, day, n } of daily.values())
      await tx.run(
        `INSERT INTO ml_daily (model_id, day, arm, served_by, version, predictions, feedback, correct) VALUES (?, ?, ?, ?, ?, ?, 0, 0)
         ON CONFLICT (model_id, day, arm, served_by, version) DO UPDATE SET predictions = ml_daily.predictions + excluded.predictions`,
        [p.modelId, day, p.arm, p.servedBy, p.version, n],
      )
    for (const l of lat.values())
      await tx.run(
        `INSERT INTO ml_latency (model_id, day, bucket, n) VALUES (?, ?, ?, ?)
         ON CONFLICT (model_id, day, bucket) DO UPDATE SET n = ml_latency.n + excluded.n`,
        [l.modelId, l.day, l.bucket, l.n],
      )
  })
}

/**
 * Deletes predictions older than `before`, 5,000 at a time so no single statement holds the
 * SQLite writer for long; returns how many went.
 */
export async function purgePredictions(db: Db, before: number): Promise<number> {
  let total = 0
  for (;;) {
    const n = await db.run(
      'DELETE FROM ml_predictions WHERE id IN (SELECT id FROM ml_predictions WHERE created_at < ? LIMIT 5000)',
      [before],
    )
    total += n
    if (n < 5000) return total
  }
}

import type { Db, Param } from '../../core/db'
import { insertMany } from '../../core/db/bulk'

const DAY = 86_400_000
/** Latency histogram buckets: round(ln(1 + us) / ln 1.05), so a percentile is within about 5%. */
const LN = Math.log(1.05)
export const latencyBucket = (us: number) => Math.round(Math.log1p(Math.max(0, us)) / LN)
export const bucketValueUs = (b: number) => Math.expm1(b * LN)

const COLS = [
  'id',
  'model_id',
  'served_by',
  'version',
  'arm',
  'entity_id',
  'prediction',
  'probability',
  'features',
  'latency_us',
  'created_at',
]

/**
 * Which model, version and arm answered: one object per arm of a cached deployment, shared by
 * every prediction it serves, so a logged prediction carries an index, not four fields.
 */
export interface Served {
  modelId: string
  servedBy: string
  version: number
  arm: string
}

/**
 * Served predictions in columns. The numbers are typed arrays, which cross to the log thread
 * without a copy (transferred); only the strings (id, entity, answer) are cloned.
 */
export interface PredictionBatch {
  n: number
  /** The arms this batch holds; `arm[i]` indexes it. */
  served: Served[]
  arm: Uint16Array
  ids: string[]
  entityIds: Array<string | null>
  predictions: string[]
  probability: Float64Array
  latencyUs: Float64Array
  createdAt: Float64Array
  /** Row i's features are `features[featureEnd[i - 1] .. featureEnd[i]]` (from 0 for row 0). */
  featureEnd: Uint32Array
  features: Float64Array
}

/**
 * A batch as it crosses to the log thread: the typed arrays moved (transferred, no copy), the
 * strings as one JSON text (structured clone of 2,000-string arrays cost 1.4 us a row, measured;
 * one JSON text of them 0.11 us).
 */
export type PackedBatch = Omit<PredictionBatch, 'served' | 'ids' | 'entityIds' | 'predictions'> & {
  strings: string
}

export function packBatch(b: PredictionBatch): { packed: PackedBatch; transfer: ArrayBuffer[] } {
  const { served, ids, entityIds, predictions, ...numbers } = b
  const packed = { ...numbers, strings: JSON.stringify([served, ids, entityIds, predictions]) }
  const transfer = [b.arm, b.probability, b.latencyUs, b.createdAt, b.featureEnd, b.features].map(
    (a) => a.buffer as ArrayBuffer,
  )
  return { packed, transfer }
}

export function unpackBatch(p: PackedBatch): PredictionBatch {
  const { strings, ...numbers } = p
  const [served, ids, entityIds, predictions] = JSON.parse(strings) as [
    Served[],
    string[],
    Array<string | null>,
    string[],
  ]
  return { ...numbers, served, ids, entityIds, predictions }
}

/** Rows a new batch has room for before it grows. */
const FIRST_ROOM = 128

/** Typed arrays of `a`'s kind, `size` long, holding `a`'s first `used` values. */
function grown<T extends Uint16Array | Uint32Array | Float64Array>(a: T, size: number, used: number): T {
  const out = new (a.constructor as new (n: number) => T)(size)
  out.set(a.subarray(0, used) as never)
  return out
}

/** An empty batch of room for `capacity` rows (it grows; the features past 8 a row). */
function emptyBatch(capacity: number): PredictionBatch {
  return {
    n: 0,
    served: [],
    arm: new Uint16Array(capacity),
    ids: [],
    entityIds: [],
    predictions: [],
    probability: new Float64Array(capacity),
    latencyUs: new Float64Array(capacity),
    createdAt: new Float64Array(capacity),
    featureEnd: new Uint32Array(capacity),
    features: new Float64Array(capacity * 8),
  }
}

/**
 * Served predictions, written behind: added in columns to the current batch, which is flushed
 * every `flushMs` (or at `maxRows`) whole, and replaced: the sink stores its rows plus the day
 * and latency rollups in one transaction. A prediction answered is visible to feedback once
 * `flush()` resolves; a crash loses at most the last interval's records, never an answer given.
 */
export class PredictionLog {
  private batch: PredictionBatch
  /** Index of each arm in the current batch's `served`. */
  private arms = new Map<Served, number>()
  /** Features used in the current batch. */
  private used = 0
  private timer: ReturnType<typeof setTimeout> | undefined
  private flushing: Promise<void> = Promise.resolve()

  /** `sink` stores one batch: on this thread (`writeRows`) or on the log thread. */
  constructor(
    private sink: (batch: PredictionBatch) => Promise<void>,
    private flushMs: number,
    private maxRows: number,
    private onError: (e: unknown) => void,
  ) {
    this.batch = emptyBatch(Math.min(maxRows, FIRST_ROOM))
  }

  add(
    served: Served,
    id: string,
    entityId: string | null,
    prediction: string,
    probability: number,
    features: ArrayLike<number>,
    latencyUs: number,
    createdAt: number,
  ): void {
    const b = this.batch
    const i = b.n++
    if (i === b.arm.length) {
      // Full: twice the room (a quiet batch stays small; a busy one reaches maxRows).
      const size = Math.min(this.maxRows, i * 2)
      b.arm = grown(b.arm, size, i)
      b.probability = grown(b.probability, size, i)
      b.latencyUs = grown(b.latencyUs, size, i)
      b.createdAt = grown(b.createdAt, size, i)
      b.featureEnd = grown(b.featureEnd, size, i)
    }
    let arm = this.arms.get(served)
    if (arm === undefined) {
      arm = b.served.push(served) - 1
      this.arms.set(served, arm)
    }
    b.arm[i] = arm
    b.ids.push(id)
    b.entityIds.push(entityId)
    b.predictions.push(prediction)
    b.probability[i] = probability
    b.latencyUs[i] = latencyUs
    b.createdAt[i] = createdAt
    const end = this.used + features.length
    if (end > b.features.length)
      b.features = grown(b.features, Math.max(end, b.features.length * 2), this.used)
    for (let j = 0; j < features.length; j++) b.features[this.used + j] = features[j]
    this.used = end
    b.featureEnd[i] = end
    if (b.n >= this.maxRows) void this.flush()
    else this.timer ??= setTimeout(() => void this.flush(), this.flushMs)
  }

  /** Resolves when everything added so far is stored. */
  flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer)
    this.timer = undefined
    if (!this.batch.n) return this.flushing
    const batch = this.batch
    this.batch = emptyBatch(Math.min(this.maxRows, FIRST_ROOM))
    this.arms.clear()
    this.used = 0
    this.flushing = this.flushing.then(() => this.sink(batch).catch(this.onError))
    return this.flushing
  }

  async close(): Promise<void> {
    await this.flush()
  }
}

/** One batch of predictions and the rollups it adds, in one transaction. */
export async function writeRows(db: Db, b: PredictionBatch): Promise<void> {
  const daily = new Map<string, { s: Served; day: number; n: number }>()
  const lat = new Map<string, { modelId: string; day: number; bucket: number; n: number }>()
  for (let i = 0; i < b.n; i++) {
    const s = b.served[b.arm[i]]
    const day = Math.floor(b.createdAt[i] / DAY) * DAY
    const dk = `${s.modelId}\n${day}\n${s.arm}\n${s.servedBy}\n${s.version}`
    const d = daily.get(dk)
    if (d) d.n++
    else daily.set(dk, { s, day, n: 1 })
    const bucket = latencyBucket(b.latencyUs[i])
    const lk = `${s.modelId}\n${day}\n${bucket}`
    const l = lat.get(lk)
    if (l) l.n++
    else lat.set(lk, { modelId: s.modelId, day, bucket, n: 1 })
  }
  const args: Param[] = []
  for (let i = 0; i < b.n; i++) {
    const s = b.served[b.arm[i]]
    const features = b.features.subarray(i ? b.featureEnd[i - 1] : 0, b.featureEnd[i])
    args.push(
      b.ids[i],
      s.modelId,
      s.servedBy,
      s.version,
      s.arm,
      b.entityIds[i],
      b.predictions[i],
      b.probability[i],
      // The JSON of the vector: finite numbers print as JSON.stringify prints them.
      `[${features.join(',')}]`,
      Math.round(b.latencyUs[i]),
      b.createdAt[i],
    )
  }
  await db.tx(async (tx) => {
    // Core's bulk insert: a few fixed statement texts (power-of-two chunks), so the prepared
    // statements are reused whatever the batch size.
    await insertMany(tx, 'ml_predictions', COLS, args, { tail: 'ON CONFLICT DO NOTHING' })
    for (const { s, day, n } of daily.values())
      await tx.run(
        `INSERT INTO ml_daily (model_id, day, arm, served_by, version, predictions, feedback, correct) VALUES (?, ?, ?, ?, ?, ?, 0, 0)
         ON CONFLICT (model_id, day, arm, served_by, version) DO UPDATE SET predictions = ml_daily.predictions + excluded.predictions`,
        [s.modelId, day, s.arm, s.servedBy, s.version, n],
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

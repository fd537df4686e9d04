import { parse } from 'csv-parse/sync'
import { invalidField } from '../../core/http'
import type { EventsService, ScannedEvent } from '../ingest/types'
import type { ModelType } from './algorithms'
import type { Dataset } from './algorithms/data'
import type { DatasetConfig } from './schema'

const DAY = 86_400_000
const HOUR = 3_600_000

export type Label =
  | { kind: 'field'; name: string }
  | { kind: 'churn'; days: number }
  | { kind: 'payer'; days: number }
  | { kind: 'next'; event: string; days: number }

export interface EventsQuery {
  /** Absent (an empty query, or no event=): every event carrying the features and the label. */
  events?: string[]
  env?: string
  from: number
  to: number
  limit?: number
  interval: number
}

const Q = 'body.datasetConfig.query'

function time(v: string, key: string): number {
  const n = /^\d{1,16}$/.test(v) ? Number(v) : Date.parse(v)
  if (!Number.isFinite(n))
    throw invalidField(Q, `${key} '${v}' is neither an ISO 8601 time nor epoch milliseconds`)
  return n
}

/** `event=a,b&env=prod&from=..&to=..&limit=..&interval=hour|day` (spaces work as separators too). */
export function parseEventsQuery(query: string, now = Date.now()): EventsQuery {
  const p = new URLSearchParams(query.trim().replace(/\s+/g, '&'))
  const known = new Set(['event', 'env', 'from', 'to', 'limit', 'interval'])
  for (const k of p.keys())
    if (!known.has(k)) throw invalidField(Q, `unknown key '${k}'; known: ${[...known].join(', ')}`)
  const events = (p.get('event') ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
  const to = p.has('to') ? time(p.get('to')!, 'to') : now
  const from = p.has('from') ? time(p.get('from')!, 'from') : to - 30 * DAY
  if (from >= to) throw invalidField(Q, 'from must be before to')
  const limit = p.has('limit') ? Number(p.get('limit')) : undefined
  if (limit !== undefined && !(Number.isInteger(limit) && limit > 0))
    throw invalidField(Q, 'limit must be a positive integer')
  const iv = p.get('interval') ?? 'day'
  if (iv !== 'day' && iv !== 'hour') throw invalidField(Q, "interval must be 'hour' or 'day'")
  return {
    events: events.length ? events : undefined,
    env: p.get('env') ?? undefined,
    from,
    to,
    limit,
    interval: iv === 'day' ? DAY : HOUR,
  }
}

export function parseLabel(label: string): Label {
  const m = /^(churn|payer):(\d{1,3})d$/.exec(label) ?? /^(next):([^:\s]+):(\d{1,3})d$/.exec(label)
  if (!m) {
    if (/^(churn|payer|next):/.test(label))
      throw invalidField(
        'body.datasetConfig.label',
        "computed labels are 'churn:<N>d', 'payer:<N>d' or 'next:<event>:<N>d'",
      )
    return { kind: 'field', name: label }
  }
  if (m[1] === 'next') return { kind: 'next', event: m[2], days: Number(m[3]) }
  return { kind: m[1] as 'churn' | 'payer', days: Number(m[2]) }
}

/** Checks what the schema cannot, before a job is created: 400 naming the field. */
export function checkDatasetConfig(type: ModelType, cfg: DatasetConfig): void {
  if (type !== 'TIME_SERIES' && !cfg.features.length)
    throw invalidField('body.datasetConfig.features', `a ${type} model needs at least one feature`)
  if ((type === 'CLASSIFICATION' || type === 'REGRESSION') && cfg.label === undefined)
    throw invalidField('body.datasetConfig.label', `a ${type} model needs a label`)
  if (cfg.label !== undefined && cfg.features.includes(cfg.label))
    throw invalidField('body.datasetConfig.label', 'must not also be a feature')
  if (cfg.source === 'events') {
    parseEventsQuery(cfg.query)
    if (cfg.label !== undefined) {
      const l = parseLabel(cfg.label)
      if (l.kind !== 'field' && type !== 'CLASSIFICATION')
        throw invalidField('body.datasetConfig.label', 'computed labels (0/1) are for CLASSIFICATION models')
    }
  }
}

/** A field of an event: top level, else inside attrs; `ts` is the client time. */
function field(e: ScannedEvent, name: string): unknown {
  if (name === 'ts') return e.ts
  const v = e.props[name]
  if (v !== undefined) return v
  const attrs = e.props.attrs
  return attrs && typeof attrs === 'object' ? (attrs as Record<string, unknown>)[name] : undefined
}

/** A number from a JSON value or CSV cell: numbers, numeric strings, booleans (0/1); else NaN. */
export function toNumber(v: unknown): number {
  if (typeof v === 'number') return Number.isFinite(v) ? v : Number.NaN
  if (typeof v === 'boolean') return v ? 1 : 0
  if (typeof v === 'string' && v.trim() !== '') {
    if (v === 'true') return 1
    if (v === 'false') return 0
    return Number(v)
  }
  return Number.NaN
}

/** Rows appended one at a time into doubling Float64Arrays. */
class Rows {
  x: Float64Array
  y: Float64Array
  n = 0
  constructor(readonly d: number) {
    this.x = new Float64Array(1024 * Math.max(1, d))
    this.y = new Float64Array(1024)
  }
  push(values: number[], y: number) {
    if (this.n === this.y.length) {
      const x = new Float64Array(this.x.length * 2)
      x.set(this.x)
      this.x = x
      const yy = new Float64Array(this.y.length * 2)
      yy.set(this.y)
      this.y = yy
    }
    this.x.set(values, this.n * this.d)
    this.y[this.n++] = y
  }
  done(features: string[]): Dataset {
    return { x: this.x.slice(0, this.n * this.d), y: this.y.slice(0, this.n), n: this.n, d: this.d, features }
  }
}

export interface Built {
  data: Dataset
  classes?: [string, string]
  rowsUsed: number
  rowsSkipped: number
}

/** Two label values as classes 0 and 1: numeric order when both are numbers, false before true, else text order. */
function classesOf(values: Set<string>): [string, string] {
  if (values.size !== 2)
    throw new Error(
      `binary classification needs exactly two label values, found ${values.size}: ${[...values].slice(0, 5).join(', ')}`,
    )
  const [a, b] = [...values]
  const na = toNumber(a)
  const nb = toNumber(b)
  if (!Number.isNaN(na) && !Number.isNaN(nb)) return na <= nb ? [a, b] : [b, a]
  return a <= b ? [a, b] : [b, a]
}

/**
 * Turns raw rows into the numeric set: rows lacking a feature or the label are skipped (and
 * counted); classification labels become 0/1.
 */
function assemble(
  type: ModelType,
  features: string[],
  raw: Array<{ values: unknown[]; label: unknown }>,
  useLabel: boolean,
  fixed?: [string, string],
): Built {
  const rows = new Rows(features.length)
  let skipped = 0
  const binary = useLabel && (type === 'CLASSIFICATION' || type === 'ANOMALY_DETECTION')
  const seen = new Set<string>()
  if (binary)
    for (const r of raw)
      if (r.label !== undefined && r.label !== null && r.label !== '') seen.add(String(r.label))
  const classes = binary ? (fixed ?? classesOf(seen)) : undefined
  for (const r of raw) {
    const v = r.values.map(toNumber)
    let y = 0
    if (useLabel) {
      if (classes) y = String(r.label) === classes[1] ? 1 : String(r.label) === classes[0] ? 0 : Number.NaN
      else y = toNumber(r.label)
    }
    if (Number.isNaN(y) || v.some(Number.isNaN)) skipped++
    else rows.push(v, y)
  }
  return { data: rows.done(features), classes, rowsUsed: rows.n, rowsSkipped: skipped }
}

export function fromCsv(type: ModelType, cfg: DatasetConfig, content: string): Built {
  const records = parse(content, { columns: true, skip_empty_lines: true, trim: true }) as Record<
    string,
    string
  >[]
  if (type === 'TIME_SERIES') {
    const col = cfg.label ?? cfg.features[0]
    const y = records.map((r) => toNumber(r[col])).filter((v) => !Number.isNaN(v))
    return {
      data: { x: new Float64Array(0), y: Float64Array.from(y), n: y.length, d: 0, features: [] },
      rowsUsed: y.length,
      rowsSkipped: records.length - y.length,
    }
  }
  const useLabel = cfg.label !== undefined
  return assemble(
    type,
    cfg.features,
    records.map((r) => ({
      values: cfg.features.map((f) => r[f]),
      label: useLabel ? r[cfg.label!] : undefined,
    })),
    useLabel,
  )
}

export interface ReadContext {
  events: EventsService
  gameId: string
  maxRows: number
  now: number
  /** Throws when the job was cancelled, so a long read stops between pages. */
  check: () => void
  progress: (share: number) => void
}

/** Rows per page of a dataset's scan (events of up to 64 KB of properties each). */
const SCAN_PAGE = 1_000

/** Every page of one scan; `each` sees the rows in store order. */
async function scanAll(
  ctx: ReadContext,
  q: { env?: string; events?: string[]; from: number; to: number },
  max: number,
  /** false ends the scan; null passes a row over without counting it. */
  each: (e: ScannedEvent) => boolean | null | undefined,
): Promise<void> {
  let afterId: number | undefined
  let seen = 0
  for (;;) {
    ctx.check()
    // Each row's props are read and parsed on the event loop: pages small enough to answer between.
    const page = await ctx.events.scan({ gameId: ctx.gameId, ...q, afterId, limit: SCAN_PAGE })
    for (const e of page) {
      const r = each(e)
      if (r === false) return
      if (r !== null && ++seen >= max) return
    }
    if (page.length < SCAN_PAGE) return
    afterId = page[page.length - 1].id
  }
}

/** Training rows from the event store through the ingest plugin's service. */
export async function fromEvents(type: ModelType, cfg: DatasetConfig, ctx: ReadContext): Promise<Built> {
  const q = parseEventsQuery(cfg.query, ctx.now)
  const max = Math.min(q.limit ?? ctx.maxRows, ctx.maxRows)
  const label = cfg.label === undefined ? undefined : parseLabel(cfg.label)
  if (type === 'TIME_SERIES') {
    const buckets = Math.ceil((q.to - q.from + 1) / q.interval)
    // One row a bucket: the range is bounded as the rows are (a range of 55 million hours took a
    // 444 MB array and the only training slot for minutes).
    if (buckets > ctx.maxRows)
      throw new Error(
        `the range holds ${buckets} intervals, more than the ${ctx.maxRows} rows a training reads`,
      )
    const y = new Float64Array(buckets)
    await scanAll(ctx, q, Number.POSITIVE_INFINITY, (e) => {
      const b = Math.floor((e.ts - q.from) / q.interval)
      y[b] += label?.kind === 'field' ? toNumber(field(e, label.name)) || 0 : 1
      return undefined
    })
    return {
      data: { x: new Float64Array(0), y, n: buckets, d: 0, features: [] },
      rowsUsed: buckets,
      rowsSkipped: 0,
    }
  }
  const raw: Array<{ values: unknown[]; label: unknown; user: string | null; ts: number }> = []
  await scanAll(ctx, q, max, (e) => {
    const values = cfg.features.map((f) => field(e, f))
    const own = label?.kind === 'field' ? field(e, label.name) : undefined
    // Without event names every event is read: those lacking a feature or the label are not rows.
    if (!q.events && (values.some((v) => v === undefined) || (label?.kind === 'field' && own === undefined)))
      return null
    raw.push({
      values,
      label: own,
      user: e.userId,
      ts: e.ts,
    })
    return undefined
  })
  ctx.progress(0.5)
  let skipped = 0
  let rows = raw
  if (label && label.kind !== 'field') {
    const window = label.days * DAY
    // A row whose window is not over yet has no label yet (censored), and leaves the set.
    rows = raw.filter((r) => r.user !== null && r.ts + window <= ctx.now)
    skipped = raw.length - rows.length
    const users = new Set(rows.map((r) => r.user!))
    const times = new Map<string, number[]>()
    await scanAll(
      ctx,
      {
        env: q.env,
        events: label.kind === 'next' ? [label.event] : undefined,
        from: q.from,
        to: q.to + window,
      },
      Number.POSITIVE_INFINITY,
      (e) => {
        if (!e.userId || !users.has(e.userId)) return undefined
        if (
          label.kind === 'payer' &&
          !((e.amountCents ?? 0) > 0 && (field(e, 'status') ?? 'success') === 'success')
        )
          return undefined
        const list = times.get(e.userId)
        if (list) list.push(e.ts)
        else times.set(e.userId, [e.ts])
        return undefined
      },
    )
    for (const list of times.values()) list.sort((a, b) => a - b)
    for (const r of rows) {
      const hit = within(times.get(r.user!), r.ts, r.ts + window)
      r.label = label.kind === 'churn' ? (hit ? 0 : 1) : hit ? 1 : 0
    }
  }
  const built = assemble(
    type,
    cfg.features,
    rows,
    label !== undefined,
    label && label.kind !== 'field' ? ['0', '1'] : undefined,
  )
  built.rowsSkipped += skipped
  return built
}

/** Whether a sorted list has a value in (lo, hi]. */
function within(list: number[] | undefined, lo: number, hi: number): boolean {
  if (!list) return false
  let a = 0
  let b = list.length
  while (a < b) {
    const m = (a + b) >> 1
    if (list[m] <= lo) a = m + 1
    else b = m
  }
  return a < list.length && list[a] <= hi
}

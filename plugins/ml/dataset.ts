import { invalidField } from '../../core/http'
import type { EventsService, ScannedEvent } from '../ingest/types'
import type { ModelType } from './algorithms'
import { type Built, RowBuilder, toNumber } from './rows'
import type { DatasetConfig } from './schema'

export type { Built } from './rows'

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
  // Each event's values go straight into the numeric set, page by page (a turn of the event loop
  // between pages): a row that is not usable is counted, not kept (300k events lacking every
  // feature held 500 MB as row objects, then the loop for 1.5 s).
  const computed = label !== undefined && label.kind !== 'field' ? label : undefined
  const binary = label !== undefined && (type === 'CLASSIFICATION' || type === 'ANOMALY_DETECTION')
  const rows = new RowBuilder(
    cfg.features,
    label === undefined || computed ? { kind: 'none' } : binary ? { kind: 'binary' } : { kind: 'number' },
  )
  const window = computed ? computed.days * DAY : 0
  // Computed labels: each kept row's user (as an index into `users`) and time.
  const users = new Map<string, number>()
  const rowUser: number[] = []
  const rowTs: number[] = []
  let censored = 0
  await scanAll(ctx, q, max, (e) => {
    const own = label?.kind === 'field' ? field(e, label.name) : undefined
    // Without event names every event is read: those lacking a feature or the label are not rows.
    if (!q.events) {
      if (label?.kind === 'field' && own === undefined) return null
      for (const f of cfg.features) if (field(e, f) === undefined) return null
    }
    // A row whose window is not over yet has no label yet (censored), and leaves the set.
    if (computed && (e.userId === null || e.ts + window > ctx.now)) {
      censored++
      return undefined
    }
    if (rows.add((j) => field(e, cfg.features[j]), own) && computed) {
      let u = users.get(e.userId!)
      if (u === undefined) {
        u = users.size
        users.set(e.userId!, u)
      }
      rowUser.push(u)
      rowTs.push(e.ts)
    }
    return undefined
  })
  ctx.progress(0.5)
  if (!computed) return rows.done()
  // The label: each kept row's user's later events, by user.
  const times: number[][] = []
  await scanAll(
    ctx,
    {
      env: q.env,
      events: computed.kind === 'next' ? [computed.event] : undefined,
      from: q.from,
      to: q.to + window,
    },
    Number.POSITIVE_INFINITY,
    (e) => {
      const u = e.userId === null ? undefined : users.get(e.userId)
      if (u === undefined) return undefined
      if (
        computed.kind === 'payer' &&
        !((e.amountCents ?? 0) > 0 && (field(e, 'status') ?? 'success') === 'success')
      )
        return undefined
      const list = times[u]
      if (list) list.push(e.ts)
      else times[u] = [e.ts]
      return undefined
    },
  )
  for (const list of times) list?.sort((a, b) => a - b)
  for (let i = 0; i < rows.n; i++) {
    const hit = within(times[rowUser[i]], rowTs[i], rowTs[i] + window)
    rows.y[i] = computed.kind === 'churn' ? (hit ? 0 : 1) : hit ? 1 : 0
  }
  const built = rows.done(['0', '1'])
  built.rowsSkipped += censored
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

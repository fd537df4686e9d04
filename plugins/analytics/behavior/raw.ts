import type { Db } from '../../../core/db'
import { inPartOrder } from '../../../core/ordered'
import type {
  IngestService,
  ScannedEvent,
  TimelinePage,
  TimelineQuery,
  TimelineText,
} from '../../ingest/types'
import { HOUR, floorTo } from '../lib/time'
import type { TimeScope } from './behavior'
import { TextTimelineBuilder, TimelineBuilder, type Timelines } from './timeline'

/** A page of the raw scan: at most this many rows per query. */
export const PAGE = 10_000
/**
 * A page of the scan that reads the events' properties: each row's `props` (up to 64 KB, any SDK
 * key can send them) is read and parsed on the event loop, which yields only between pages. At
 * 10,000 rows of 17 KB one page held the loop 2 s (a viewer's funnel with a property filter).
 */
export const PROPS_PAGE = 1_000

/**
 * The id ranges holding the stored events of client time `[from, to)` (`analytics_event_span`,
 * per client hour and receive window), merged where they overlap or touch, in id order.
 */
export async function eventIdRanges(db: Db, q: TimeScope): Promise<Array<[number, number]>> {
  const rows = await db.all<{ first_id: number; last_id: number }>(
    `SELECT first_id, last_id FROM analytics_event_span WHERE game_id = ? AND env = ? AND hour >= ? AND hour < ?
     ORDER BY first_id`,
    [q.gameId, q.env, floorTo(q.from, HOUR), q.to],
  )
  const out: Array<[number, number]> = []
  for (const r of rows) {
    const lo = Number(r.first_id)
    const hi = Number(r.last_id)
    const last = out[out.length - 1]
    if (last && lo <= last[1] + 1) last[1] = Math.max(last[1], hi)
    else out.push([lo, hi])
  }
  return out
}

/**
 * The raw reads of funnels, paths and the event list: only the id ranges where the range's
 * events were stored (`eventIdRanges`), page by page.
 */
export function rawReads(db: Db, ingest: Pick<IngestService, 'scan' | 'timeline' | 'timelineText'>) {
  const idRanges = (q: TimeScope) => eventIdRanges(db, q)

  /** Reads the range's id ranges page by page (`read(afterId, toId)`), in id order, handing each page to `each`. */
  async function pages<R extends { id: number }>(
    q: TimeScope,
    limit: number,
    read: (afterId: number, toId: number) => Promise<R[]>,
    each: (page: R[]) => void,
  ): Promise<void> {
    for (const [lo, hi] of await idRanges(q)) {
      let after = lo - 1
      for (;;) {
        const page = await read(after, hi)
        each(page)
        if (page.length < limit) break
        after = page[page.length - 1].id
        // SQLite reads run on the event loop: let requests (ingestion) in between pages.
        await new Promise((r) => setImmediate(r))
      }
    }
  }

  /** Every stored event of the range (optionally only `events`, one user), page by page, in id order. */
  const walk = (
    q: TimeScope,
    opts: { events?: string[]; userId?: string; withProps: boolean },
    each: (page: ScannedEvent[]) => void,
  ) => {
    const limit = opts.withProps ? PROPS_PAGE : PAGE
    return pages(
      q,
      limit,
      (afterId, toId) =>
        ingest.scan({
          gameId: q.gameId,
          env: q.env,
          from: q.from,
          to: q.to - 1,
          afterId,
          toId,
          events: opts.events,
          userId: opts.userId,
          withProps: opts.withProps,
          limit,
        }),
      each,
    )
  }

  /** The range's events (optionally only `events`) as light rows (user, name, time), page by page, in id order. */
  async function walkLight<P>(
    q: TimeScope,
    events: string[] | undefined,
    each: (page: P) => void,
    walk: (q: TimelineQuery, each: (page: P) => void) => Promise<void>,
  ) {
    const ranges = (await idRanges(q)).map(
      ([lo, hi]) =>
        (emit: (page: P) => void) =>
          walk(
            {
              gameId: q.gameId,
              env: q.env,
              from: q.from,
              to: q.to,
              afterId: lo - 1,
              toId: hi,
              events,
              limit: PAGE,
            },
            emit,
          ),
    )
    // SQLite's walks queue on its reading threads (see `WalkThreads`): asked for at once, so a
    // thread goes on to the next range while the event loop works through the pages held from
    // the one before. PostgreSQL's take four connections each: one range after another.
    if (db.dialect === 'sqlite') await inPartOrder(ranges, each)
    else for (const range of ranges) await range(each)
  }

  /**
   * Per user, the events of the range sorted by time (then by id), each with the number `code`
   * gives its name (names it answers undefined for are left out). Read light: only user, name
   * and time of each row, and the code worked out once per name, since a 24-hour read of a
   * busy game is hundreds of thousands of rows and the per-row work is what its time is made of.
   */
  async function timelines(
    q: TimeScope,
    events: string[] | undefined,
    code: (event: string) => number | undefined,
  ): Promise<Timelines> {
    // The pages come as joined text: parsed in place (see `TextTimelineBuilder`).
    const t = new TextTimelineBuilder(code)
    await walkLight(q, events, (page: TimelineText | TimelinePage) => t.add(page), ingest.timelineText)
    return t.done()
  }

  /** As `timelines`, for codes that depend on an event's properties (a funnel step's filter): full rows. */
  async function timelinesWithProps(
    q: TimeScope,
    events: string[] | undefined,
    code: (e: ScannedEvent) => number | undefined,
  ): Promise<Timelines> {
    const b = new TimelineBuilder()
    await walk(q, { events, withProps: true }, (page) => {
      for (const e of page) {
        if (e.userId === null) continue
        const c = code(e)
        if (c !== undefined) b.add(e.userId, e.ts, c)
      }
    })
    return b.done()
  }

  return { ingest, walk, timelines, timelinesWithProps }
}
export type RawReads = ReturnType<typeof rawReads>

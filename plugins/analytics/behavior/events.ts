import type { ScannedEvent } from '../../ingest/types'
import { type TimeScope, iso } from './behavior'
import { PAGE, type RawReads } from './raw'

/** Raw events of the range, newest first (client time, then id), paged; `total` counts every match. */
export async function eventList(
  raw: RawReads,
  q: TimeScope & { event?: string; userId?: string; page: number; pageSize: number },
) {
  const keep = (q.page + 1) * q.pageSize
  let best: ScannedEvent[] = []
  let total = 0
  const newer = (a: ScannedEvent, b: ScannedEvent) => b.ts - a.ts || b.id - a.id
  /** The oldest row kept once `best` was trimmed: older rows cannot be on the page. */
  let oldest: ScannedEvent | undefined
  await raw.walk(
    q,
    { events: q.event ? [q.event] : undefined, userId: q.userId, withProps: false },
    (page) => {
      total += page.length
      for (const e of page) if (oldest === undefined || newer(e, oldest) < 0) best.push(e)
      if (best.length > 2 * keep + PAGE) {
        best = best.sort(newer).slice(0, keep)
        oldest = best[keep - 1]
      }
    },
  )
  const rows = best.sort(newer).slice(q.page * q.pageSize, keep)
  // The page's own rows again, with their properties (a point read each).
  const full = await Promise.all(
    rows.map(async (r) => {
      const [e] = await raw.ingest.scan({
        gameId: q.gameId,
        env: q.env,
        from: r.ts,
        to: r.ts,
        afterId: r.id - 1,
        toId: r.id,
        limit: 1,
      })
      return e ?? r
    }),
  )
  return {
    items: full.map((e) => ({
      id: String(e.id),
      timestamp: iso(e.ts),
      event: e.event,
      userId: e.userId,
      sessionId: e.sessionId,
      properties: e.props,
    })),
    total,
    page: q.page,
    pageSize: q.pageSize,
  }
}

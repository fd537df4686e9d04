import type { Db } from '../../../core/db'
import { deleteInSlices } from '../../../core/db/slices'
import { DAY } from './sql'

/** The event times ingestion takes around a receipt (`max_event_age_days`, `max_event_future_s`), in ms. */
export interface TimeWindow {
  ageMs: number
  futureMs: number
}

/**
 * A result's time may precede its event's by a local day's or week's start (up to 7 days and a
 * zone's offset) and follow it by a zone's offset: the bounds of the results are that much wider.
 */
const BEFORE_SLACK = 8 * DAY
const AFTER_SLACK = DAY

/**
 * Rows stored before ingestion refused event times outside the window (a 1970 or 9999 event) and
 * what they made (migration 011, `far_dated`), in slices (core/db/slices.ts):
 *
 * - raw events, invocations and payments whose time is more than `ageMs` before or `futureMs`
 *   after their own receipt;
 * - each result table's rows (`dated`: its time columns) with a time no event inside the window
 *   could have made: after now plus `futureMs`, or before the event store's first migration (no
 *   event was received before it) less `ageMs`. Day counters outlive the raw events and the purge
 *   reaches neither a future day nor a counter: without this they stayed for ever.
 *
 * Answers how many rows went.
 */
export async function forgetFarDated(
  db: Db,
  w: TimeWindow,
  dated: Readonly<Record<string, readonly string[]>>,
  now: number,
  pause: () => Promise<void>,
): Promise<number> {
  let n = 0
  for (const table of ['ingest_events', 'ingest_invocations', 'ingest_payments'])
    n += await deleteInSlices(
      db,
      table,
      { where: 'ts < received_at - ? OR ts > received_at + ?', params: [w.ageMs, w.futureMs], pinned: [] },
      pause,
    )
  const first = await db.get<{ t: number | null }>(
    "SELECT MIN(applied_at) AS t FROM liveops_migrations WHERE plugin = 'ingest'",
  )
  const from = Number(first?.t ?? now) - w.ageMs - BEFORE_SLACK
  const to = now + w.futureMs + AFTER_SLACK
  for (const [table, cols] of Object.entries(dated))
    n += await deleteInSlices(
      db,
      table,
      {
        where: cols.map((c) => `${c} < ? OR ${c} > ?`).join(' OR '),
        params: cols.flatMap(() => [from, to]),
        pinned: [],
      },
      pause,
    )
  return n
}

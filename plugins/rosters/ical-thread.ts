import { Invalid } from '../../core/http'
import { oneShot, workerUrl } from '../../core/thread'
import type { ExpandReply } from './ical.worker'
import type { StoredPeriod } from './schema'

/**
 * `expandCalendar` on a thread of its own, ended after `timeoutMs`: parsing and expanding a
 * calendar never blocks the event loop (issue 34 point 7), and a recurrence rule ical.js can
 * never satisfy (`FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=30` loops inside one step, past any count)
 * is stopped with a 400 instead of freezing the server.
 */
export async function expandInThread(
  text: string,
  from: number,
  until: number,
  timeoutMs: number,
): Promise<StoredPeriod[]> {
  const reply = await oneShot<ExpandReply>(
    workerUrl('plugins/rosters/ical.worker.ts'),
    { text, from, until },
    {
      timeoutMs,
      onTimeout: () =>
        new Invalid(
          `body: the calendar did not expand within ${timeoutMs} ms (a recurrence rule that never or too rarely occurs)`,
          { field: 'body', reason: 'expansion timed out' },
        ),
    },
  )
  if (!reply.ok) throw new Invalid(reply.message, reply.details)
  return reply.periods
}

import { Invalid, TooManyRequests } from '../../core/http'
import { oneShot, workerUrl } from '../../core/thread'
import { STAGE, newProgressBuffer, progressOf } from './ical'
import type { ExpandReply } from './ical.worker'
import type { StoredPeriod } from './schema'

/**
 * When each import now expanding ends at the latest, across the whole process: every import holds
 * a thread, its calendar's memory and a core until it ends (eight 1.7 MB calendars at once took
 * both cores and doubled the RSS), so the cap is the process's, not one app's.
 */
const running: number[] = []

/**
 * `expandCalendar` on a thread of its own, ended after `timeoutMs`: parsing and expanding a
 * calendar never blocks the event loop (issue 34 point 7), and a recurrence rule ical.js can
 * never satisfy (`FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=30` loops inside one step, past any count)
 * is stopped with a 400 instead of freezing the server. Past `concurrency` imports at once,
 * 429 at once, with Retry-After when the first running one ends at the latest.
 */
export async function expandInThread(
  text: string,
  from: number,
  until: number,
  limits: { timeoutMs: number; concurrency: number },
): Promise<StoredPeriod[]> {
  const { timeoutMs, concurrency } = limits
  if (running.length >= concurrency) {
    const seconds = Math.max(1, Math.ceil((Math.min(...running) - Date.now()) / 1000))
    throw new TooManyRequests(
      `${running.length} calendar imports are running, the most rosters.import_concurrency allows at once; retry in ${seconds} s`,
      seconds,
      'too_many_imports',
    )
  }
  const deadline = Date.now() + timeoutMs
  running.push(deadline)
  const shared = newProgressBuffer()
  try {
    const reply = await oneShot<ExpandReply>(
      workerUrl('plugins/rosters/ical.worker.ts'),
      { text, from, until, progress: shared },
      { timeoutMs, onTimeout: () => timedOut(progressOf(shared), timeoutMs) },
    )
    if (!reply.ok) throw new Invalid(reply.message, reply.details)
    return reply.periods
  } finally {
    running.splice(running.indexOf(deadline), 1)
  }
}

/**
 * The 400 of an import ended at its time limit, saying what it was doing then (`progress`, as the
 * thread left it, see ical.ts). Stuck inside one recurrence step for at least half the time the
 * thread spent on the calendar: a rule that never or too rarely occurs. Anything else: the
 * calendar is too much work for the limit. (The thread's own start is not the calendar's doing:
 * on a loaded machine it took half of a 1 s limit, and the rule was then blamed on the size.)
 */
export function timedOut(
  progress: Float64Array<ArrayBufferLike>,
  timeoutMs: number,
  now = Date.now(),
): Invalid {
  const [stage, walked, stepAt, began] = progress
  if (stage === STAGE.stepping && now - stepAt >= (now - began) / 2)
    return new Invalid(
      `body: the calendar did not expand within ${timeoutMs} ms (a recurrence rule that never or too rarely occurs)`,
      { field: 'body', reason: 'expansion timed out' },
    )
  const doing =
    stage === STAGE.walking || stage === STAGE.stepping
      ? `expanding its events (${walked} occurrences so far)`
      : 'reading the calendar'
  return new Invalid(
    `body: the import took longer than its limit of ${timeoutMs} ms (rosters.import_timeout_ms) while ${doing}: import a smaller calendar or a narrower window`,
    { field: 'body', reason: 'import timed out' },
  )
}

/**
 * Entry of an iCalendar expansion thread (see ical-thread.ts): one import per thread, so a
 * calendar that is slow to parse or expand never holds the event loop, and a rule that never
 * yields an occurrence is ended by `terminate()`.
 */
import { HttpError } from '../../core/http'
import { expandCalendar, progressOf } from './ical'

declare const self: Worker

/** `progress`: shared with the caller, which reads it if it has to end the thread (ical.ts `progressOf`). */
export type ExpandRequest = { text: string; from: number; until: number; progress: SharedArrayBuffer }
export type ExpandReply =
  | { ok: true; periods: Array<{ start: string; end: string }> }
  | { ok: false; message: string; details?: unknown }

self.onmessage = (m: MessageEvent<ExpandRequest>) => {
  try {
    self.postMessage({
      ok: true,
      periods: expandCalendar(m.data.text, m.data.from, m.data.until, progressOf(m.data.progress)),
    } satisfies ExpandReply)
  } catch (e) {
    self.postMessage({
      ok: false,
      message: e instanceof HttpError ? e.message : `body: cannot be expanded: ${(e as Error)?.message ?? e}`,
      details: e instanceof HttpError ? e.details : { field: 'body', reason: 'cannot be expanded' },
    } satisfies ExpandReply)
  }
}

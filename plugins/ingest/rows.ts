import { type NormEvent, pick, str } from './signed/validate'

/**
 * Helpers for the code that turns a commit's events into rows: ingest's writer and its log
 * (store/log.ts).
 *
 * Rows go out stream by stream, each key part compared as text: the order of the key joined
 * with \u0001, as the writer has always sorted. Concurrent commits (PostgreSQL) therefore lock
 * rows in one order and never deadlock; on SQLite sorted keys touch each B-tree page once.
 */
export { byStream, byText, inOrder } from '../../core/order'

/**
 * The `payment_status` of a log row that supersedes a client's payment (`LogPayment.supersedes`):
 * its status with this suffix. Only the server route's write takes it; a client's status is one
 * of `PAYMENT_STATUSES`, so no client can mark a row so.
 */
export const SUPERSEDING = '/supersedes'
export const superseding = (status: string): string => `${status}${SUPERSEDING}`

/** What a `function.invoke` event says of its call. */
export interface InvocationFacts {
  functionId: string
  outcome: 'success' | 'failure'
  actor: string | null
  traceId: string | null
}

export function invocationOf(e: NormEvent): InvocationFacts {
  // success or failure (spec 1, /invocations): an outcome that says anything but success
  // (error, timeout, failed) is a failure; none at all counts as the call succeeding.
  const said = str(pick(e.props, 'outcome'))
  return {
    functionId: str(pick(e.props, 'functionId')) ?? str(pick(e.props, 'function_id')) ?? 'unknown',
    outcome: said == null || said === 'success' ? 'success' : 'failure',
    actor: str(pick(e.props, 'actor')),
    traceId: str(pick(e.props, 'traceId')) ?? str(pick(e.props, 'trace_id')),
  }
}

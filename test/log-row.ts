import type { LogEvent } from '../core/event-log-types'

/** A log row as consumers get it, every optional field empty unless given. */
export const logRow = (r: Pick<LogEvent, 'id' | 'ts'> & Partial<LogEvent>): LogEvent =>
  ({
    receivedAt: r.ts,
    gameId: 'g',
    env: 'live',
    event: 'e',
    userId: null,
    sessionId: null,
    amountCents: null,
    currency: null,
    durationMs: null,
    network: null,
    level: null,
    eventId: null,
    props: {},
    ...r,
  }) as LogEvent

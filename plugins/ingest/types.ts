/**
 * What the ingest plugin offers other plugins (`ctx.service('events')`), in particular the
 * experiment analysis of the experiments plugin. Implemented over the event store, which only
 * the ingest plugin reads and writes.
 */
export interface ExperimentCounts {
  /** Per variant name: users whose first `experiment_exposure` (attrs exp = experiment id) named it. */
  variants: Record<
    string,
    {
      exposures: number
      /** Per metric event name: exposed users who sent that event at or after their first exposure. */
      conversions: Record<string, number>
    }
  >
}

/** One stored event as `EventsService.scan` returns it. */
export interface ScannedEvent {
  /** The store's time-ordered id: pass the last one as `afterId` for the next page. */
  id: number
  gameId: string
  env: string
  event: string
  /** Client time, epoch ms. */
  ts: number
  userId: string | null
  amountCents: number | null
  /** The event object as sent (business fields at top level or inside `attrs`). */
  props: Record<string, unknown>
}

export interface EventsService {
  /**
   * Counts for one experiment. A user counts once, in the variant of their first exposure.
   * `metrics` are event names (the experiment's primary and secondary metrics).
   */
  experimentCounts(q: {
    gameId: string
    environment: string
    experimentId: string
    metrics: string[]
  }): Promise<ExperimentCounts>
  /**
   * One page of raw events of a game (training sets of the ml plugin), in store order, at most
   * `limit` (<= 10,000) rows: `env`, `events` (names) and the client-time range `[from, to]`
   * (epoch ms) narrow it; `afterId` continues after the last row of the previous page. A full
   * read walks the event table once, page by page.
   */
  scan(q: {
    gameId: string
    env?: string
    events?: string[]
    from: number
    to: number
    afterId?: number
    limit: number
  }): Promise<ScannedEvent[]>
  /**
   * Stores already-validated events as a server-side write (used by tests and other plugins);
   * resolves once they are durable.
   */
  ingest(events: Array<Record<string, unknown>>): Promise<{ accepted: number }>
}

declare module '../../core/plugin' {
  interface Services {
    events: EventsService
  }
}

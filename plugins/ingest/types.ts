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

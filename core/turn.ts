/**
 * A turn of the event loop: what waits (requests, ingestion's commits, timers) runs before the
 * caller goes on. Work that holds the thread for long (a consumer's batch on SQLite, whose
 * statements are synchronous) takes one between its parts, so no request waits for all of it.
 */
export const turn = (): Promise<void> => new Promise<void>((resolve) => setImmediate(resolve))

/**
 * A turn of the event loop: what waits (requests, ingestion's commits, timers) runs before the
 * caller goes on. Work that holds the thread for long (a consumer's batch on SQLite, whose
 * statements are synchronous) takes one between its parts, so no request waits for all of it.
 */
export const turn = (): Promise<void> => new Promise<void>((resolve) => setImmediate(resolve))

/** Resolves when one of `wakers` is called (each waiter adds its own) or after `ms`. */
export function wakeOrTimeout(wakers: Set<() => void>, ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(t)
      wakers.delete(done)
      resolve()
    }
    const t = setTimeout(done, ms)
    wakers.add(done)
  })
}

/** Resolves when `p` does or after `ms`, whichever comes first (`p` goes on; its outcome is dropped). */
export async function within(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const bound = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms)
  })
  await Promise.race([
    p.then(
      () => undefined,
      () => undefined,
    ),
    bound,
  ])
  clearTimeout(timer)
}

/**
 * One request answered by one reply on a thread of its own, for work that must not hold the
 * event loop (parsing an upload, expanding a calendar): the worker at `entry` gets `message`
 * and posts one reply; the thread is ended with it, on a failure, or after `timeoutMs`, when
 * `onTimeout()` is thrown. Entries are listed in scripts/build.ts for the compiled binary.
 */
export function oneShot<Reply>(
  entry: string,
  message: unknown,
  opts: { timeoutMs?: number; onTimeout?: () => Error } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const w = new Worker(entry)
    let settled = false
    const done = (f: () => void) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      w.terminate()
      f()
    }
    const timer =
      opts.timeoutMs === undefined
        ? undefined
        : setTimeout(
            () => done(() => reject(opts.onTimeout?.() ?? new Error(`no reply within ${opts.timeoutMs} ms`))),
            opts.timeoutMs,
          )
    w.onmessage = (m: MessageEvent<Reply>) => done(() => resolve(m.data))
    w.onerror = (e) => done(() => reject(new Error(`thread failed: ${e.message}`)))
    w.postMessage(message)
  })
}

/** A worker file's address, from source and from the compiled binary (`path` from the repository root). */
export function workerUrl(path: string): string {
  if (import.meta.url.startsWith('file:///$bunfs/')) return `./${path}`
  return new URL(path, new URL('../', import.meta.url)).href
}

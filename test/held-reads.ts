import type { Db } from '../core/db'

/**
 * `db`, whose reads (`get` or `all`) that `matches` are counted and, while a hold is set, held
 * after they read the store: as a read on PostgreSQL waits on the network while other requests
 * run. For the races of an in-memory copy whose read of the store meets a write.
 *
 *   const { db: slow, reads, hold } = heldReads(db, 'all', (sql) => sql.includes('FROM rosters'))
 *   const release = hold()   // the next matching reads wait until release()
 */
export function heldReads(db: Db, method: 'get' | 'all', matches: (sql: string) => boolean) {
  const state = { reads: 0, held: undefined as Promise<void> | undefined }
  const slow = new Proxy(db, {
    get(target, key) {
      if (key === method)
        return async (sql: string, params?: unknown[]) => {
          const out = await (target[method] as (s: string, p?: unknown[]) => Promise<unknown>)(sql, params)
          if (matches(sql)) {
            state.reads++
            await state.held
          }
          return out
        }
      const v = Reflect.get(target, key)
      return typeof v === 'function' ? v.bind(target) : v
    },
  }) as Db
  return {
    db: slow,
    /** Matching reads so far. */
    reads: () => state.reads,
    /** Holds the next matching reads (until `reached`); the answer releases those held. */
    hold(): () => void {
      let release = () => {}
      state.held = new Promise<void>((r) => {
        release = r
      })
      return release
    },
    /** Resolves once `n` matching reads have read the store; the ones after them are not held. */
    async reached(n: number): Promise<void> {
      while (state.reads < n) await Bun.sleep(1)
      state.held = undefined
    },
  }
}

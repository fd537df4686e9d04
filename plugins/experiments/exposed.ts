import type { Db } from '../../core/db'

/** Values per `IN (...)` list: under every engine's limit on a statement's parameters. */
const CHUNK = 500

/** A map of bounded size that forgets the entry used longest ago. */
export class Lru<K, V> {
  private map = new Map<K, V>()
  constructor(readonly capacity: number) {}

  get(k: K): V | undefined {
    const v = this.map.get(k)
    if (v !== undefined) {
      this.map.delete(k)
      this.map.set(k, v)
    }
    return v
  }

  set(k: K, v: V): void {
    this.map.delete(k)
    this.map.set(k, v)
    if (this.map.size > this.capacity) this.map.delete(this.map.keys().next().value as K)
  }

  clear(): void {
    this.map.clear()
  }

  get size(): number {
    return this.map.size
  }
}

export const scopeOf = (gameId: string, env: string) => `${gameId}\u0001${env}`

/**
 * Which of `ids` name an experiment exposures count for, each with its `game \u0001 env`: any but a
 * draft. A draft was never in the public configuration, so no client can have been exposed to
 * it; a paused one was, and its exposures still arrive (clients that read the configuration before
 * the pause, events sent late) and count in its results, which are read whatever the status. A
 * status never goes back to draft, so a rebuild takes the same exposures as the first pass did.
 */
export type CountedExperiments = (ids: readonly string[]) => Promise<Map<string, string>>

/** `CountedExperiments` read from the store that keeps the experiments (the main one). */
export function countedIn(db: Db): CountedExperiments {
  return async (ids) => {
    const out = new Map<string, string>()
    for (let i = 0; i < ids.length; i += CHUNK) {
      const part = ids.slice(i, i + CHUNK)
      const rows = await db.all<{ id: string; game_id: string; environment: string }>(
        `SELECT id, game_id, environment FROM experiments WHERE status <> 'draft' AND id IN (${part.map(() => '?').join(', ')})`,
        part,
      )
      for (const r of rows) out.set(r.id, scopeOf(r.game_id, r.environment))
    }
    return out
  }
}

import { fromJson } from '../../core/db'
import { Generation } from '../../core/generation'
import type { AbTestState, ModelRow } from './store'

/** A cached deployment: the row, its A/B state read once, and its arms (`A`) built once. */
export type CachedDeployment<A> = {
  row: ModelRow
  at: number
  /** A read that replaces this entry is under way. */
  refreshing?: boolean
  ab: AbTestState | null
  arms: Record<string, A | undefined>
}

/**
 * Deployments by model, cached for `ttlMs` so a prediction reads no row. A model changed here or
 * on another instance is forgotten (`forget`); a read under way meanwhile may be from before the
 * change (a deploy, a rollback, an A/B test stopped), so it is read again instead of kept.
 */
export class DeploymentCache<A> {
  private readonly entries = new Map<string, CachedDeployment<A>>()
  private readonly changes = new Generation()

  constructor(
    private readonly read: (modelId: string) => Promise<ModelRow>,
    private readonly ttlMs: number,
    private readonly now: () => number,
  ) {}

  forget(modelId: string): void {
    this.changes.bump()
    this.entries.delete(modelId)
  }

  /**
   * The cached deployment, without a promise while it is younger than twice the cache time:
   * past the cache time it is still served while one read refreshes it (so the requests of that
   * moment do not all wait on the store); older, or absent, the request waits for the read.
   */
  get(id: string): CachedDeployment<A> | Promise<CachedDeployment<A>> {
    const hit = this.entries.get(id)
    if (hit) {
      const age = this.now() - hit.at
      if (age < this.ttlMs) return hit
      if (age < 2 * this.ttlMs) {
        if (!hit.refreshing) {
          hit.refreshing = true
          // A failed read drops the entry: the next request reads (and answers 404 or 503) itself.
          this.load(id).catch(() => {
            if (this.entries.get(id) === hit) this.entries.delete(id)
          })
        }
        return hit
      }
    }
    return this.load(id)
  }

  private async load(id: string): Promise<CachedDeployment<A>> {
    const { value: row, settled } = await this.changes.settled(() => this.read(id))
    const d = { row, at: this.now(), ab: fromJson<AbTestState | null>(row.ab_test, null), arms: {} }
    if (settled) this.entries.set(id, d)
    return d
  }
}

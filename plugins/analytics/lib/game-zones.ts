import { Generation } from '../../../core/generation'
import { type Zone, zone } from './zone'

/**
 * The time zones of the games a consumer buckets days by, looked up once per game. A game whose
 * zone changed is forgotten (`forget`, on the games service's change notices); a lookup under way
 * meanwhile is taken again rather than keeping the old zone; and `changed` compares every zone
 * kept with the game's own, for a notice lost on the way (the analytics sync job).
 */
export class GameZones {
  private readonly zones = new Map<string, Zone>()
  private readonly forgotten = new Generation()

  constructor(private readonly timezone: (gameId: string) => Promise<string | undefined>) {}

  has(gameId: string): boolean {
    return this.zones.has(gameId)
  }

  get(gameId: string): Zone | undefined {
    return this.zones.get(gameId)
  }

  /** Looks up the zones of `games`; none is kept when a game was forgotten meanwhile (the caller looks again). */
  async load(games: readonly string[]): Promise<void> {
    const read = await this.forgotten.settled(() => Promise.all(games.map((g) => this.timezone(g))))
    if (read.settled) games.forEach((g, i) => this.zones.set(g, zone(read.value[i])))
  }

  forget(gameId: string): void {
    this.forgotten.bump()
    this.zones.delete(gameId)
  }

  /** The games whose kept zone is no longer their own. */
  async changed(): Promise<string[]> {
    const out: string[] = []
    for (const [g, z] of [...this.zones]) if (zone(await this.timezone(g)).name !== z.name) out.push(g)
    return out
  }
}

import { zoneOffset } from '../../../core/zone'
import { DAY, HOUR, floorTo } from './time'

/**
 * Days in a game's time zone (issue 17: "days in the game's time zone"). A local date is kept
 * as the epoch ms of that date's midnight in UTC (`Date.UTC(y, m, d)`), so days stay multiples
 * of `DAY`, every day arithmetic of the rollups holds, and `new Date(day).toISOString()` prints
 * the local date. A zone's offset is looked up once per hour (daylight saving moves on hours).
 */
export class Zone {
  private readonly at: ((ms: number) => number) | undefined
  /** hour (epoch ms) -> offset (ms) */
  private readonly offsets = new Map<number, number>()

  /** Throws for a name `Intl` does not know. */
  constructor(readonly name: string) {
    if (name === 'UTC' || name === 'Etc/UTC') return
    this.at = zoneOffset(name)
    if (!this.at) throw new RangeError(`unknown time zone: ${name}`)
  }

  /** Local time minus UTC at instant `ms`. */
  offset(ms: number): number {
    if (!this.at) return 0
    const hour = floorTo(ms, HOUR)
    let o = this.offsets.get(hour)
    if (o === undefined) {
      o = this.at(hour)
      if (this.offsets.size > 10_000) this.offsets.clear()
      this.offsets.set(hour, o)
    }
    return o
  }

  /** The local date of instant `ms`, as its UTC midnight. */
  day(ms: number): number {
    return floorTo(ms + this.offset(ms), DAY)
  }

  /** Today's local date. */
  today(now = Date.now()): number {
    return this.day(now)
  }
}

const zones = new Map<string, Zone>()

/** A shared `Zone` per name; an unknown name falls back to UTC (the game schema checks names). */
export function zone(name: string | undefined): Zone {
  const key = name || 'UTC'
  let z = zones.get(key)
  if (!z) {
    try {
      z = new Zone(key)
    } catch {
      z = zones.get('UTC') ?? new Zone('UTC')
    }
    zones.set(key, z)
  }
  return z
}

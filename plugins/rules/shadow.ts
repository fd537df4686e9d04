import type { MatchInput } from './match'

const HOUR = 3_600_000

export interface Sample {
  at: string
  type: string
  level: string
  title: string
  channels: string[]
}

const WEEK_HOURS = 168
const SAMPLES = 20

/**
 * In-process observation of a shadow rule (spec 2: resets on restart, not persisted). A hit
 * allocates nothing: hourly counts live in a ring of a week of hours, the newest samples in a
 * ring of reused slots, formatted only when read.
 */
export class ShadowStats {
  total = 0
  /** The hour (since the epoch) each ring slot counts, and its count. */
  private hours = new Float64Array(WEEK_HOURS).fill(-1)
  private counts = new Uint32Array(WEEK_HOURS)
  private samples: { at: number; type: string; level: string; title: string; channels: string[] }[] = []
  private next = 0
  /** Matches that would have been held back (suppressed, silenced, inhibited): not hits. */
  held: Record<string, number> = {}
  errors = 0

  hit(now: number, n: MatchInput, channels: string[]) {
    this.total++
    const h = Math.floor(now / HOUR)
    const i = h % WEEK_HOURS
    if (this.hours[i] !== h) {
      this.hours[i] = h
      this.counts[i] = 0
    }
    this.counts[i]++
    const s = this.samples[this.next]
    if (s) {
      s.at = now
      s.type = n.type
      s.level = n.level
      s.title = n.title
      s.channels = channels
    } else this.samples[this.next] = { at: now, type: n.type, level: n.level, title: n.title, channels }
    this.next = (this.next + 1) % SAMPLES
  }

  view(now: number) {
    const h = Math.floor(now / HOUR)
    let day = 0
    let week = 0
    for (let i = 0; i < WEEK_HOURS; i++) {
      const k = this.hours[i]
      if (k > h - 24) day += this.counts[i]
      if (k > h - WEEK_HOURS) week += this.counts[i]
    }
    const samples: Sample[] = []
    for (let j = 1; j <= this.samples.length; j++) {
      const s = this.samples[(this.next - j + SAMPLES) % SAMPLES]
      samples.push({ ...s, at: new Date(s.at).toISOString(), channels: [...s.channels] })
    }
    return {
      total: this.total,
      last_24h: day,
      last_7d: week,
      ...(samples.length ? { samples } : {}),
      held: this.held,
      evaluation_errors: this.errors,
    }
  }
}

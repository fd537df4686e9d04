import type { Exec } from './mysql'

const rowsOf = <T>(res: unknown): T[] => {
  const first = (res as [unknown])[0]
  return Array.isArray(first) ? (first as T[]) : []
}

/** How often an instance reads the notices of the others. */
export const CHANGE_POLL_MS = 50
const CHANGE_KEEP_MS = 60_000

/**
 * LISTEN/NOTIFY over a table (core migration 007, `liveops_changes`): a notice is a row, each
 * listener polls for rows past the last id it read every CHANGE_POLL_MS. A notice whose row
 * commits after a poll saw a later id (two inserts racing) is missed; the pollers of the plugins
 * that cache (core/changes.ts) catch up on it, as after a lost PostgreSQL notice.
 */
export class ChangePoller {
  private channels = new Map<string, { last: number; fns: Set<(payload: string) => void> }>()
  private timer: ReturnType<typeof setInterval> | undefined
  private busy = false
  private sent = 0

  constructor(private readonly exec: Exec) {}

  async listen(channel: string, fn: (payload: string) => void): Promise<() => Promise<void>> {
    let ch = this.channels.get(channel)
    if (!ch) {
      const top = rowsOf<{ id: number | null }>(
        await this.exec('SELECT MAX(id) AS id FROM liveops_changes WHERE channel = ?', [channel]),
      )[0]
      ch = { last: Number(top?.id ?? 0), fns: new Set() }
      this.channels.set(channel, ch)
    }
    ch.fns.add(fn)
    this.timer ??= setInterval(() => void this.poll(), CHANGE_POLL_MS)
    return async () => {
      ch.fns.delete(fn)
      if (!ch.fns.size) this.channels.delete(channel)
      if (!this.channels.size) await this.close()
    }
  }

  async notify(channel: string, payload: string): Promise<void> {
    const now = Date.now()
    await this.exec('INSERT INTO liveops_changes (channel, payload, created_at) VALUES (?, ?, ?)', [
      channel,
      payload,
      now,
    ])
    if (++this.sent % 100 === 0)
      await this.exec('DELETE FROM liveops_changes WHERE created_at < ?', [now - CHANGE_KEEP_MS])
  }

  private async poll() {
    if (this.busy) return
    this.busy = true
    try {
      for (const [channel, ch] of this.channels) {
        const rows = rowsOf<{ id: number; payload: string }>(
          await this.exec(
            'SELECT id, payload FROM liveops_changes WHERE channel = ? AND id > ? ORDER BY id',
            [channel, ch.last],
          ),
        )
        for (const r of rows) {
          ch.last = Math.max(ch.last, Number(r.id))
          for (const fn of ch.fns) fn(r.payload)
        }
      }
    } catch {
      // The store is down: the next poll tries again.
    } finally {
      this.busy = false
    }
  }

  async close() {
    clearInterval(this.timer)
    this.timer = undefined
  }
}

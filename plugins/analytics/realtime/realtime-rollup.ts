import type { Db, Param } from '../../../core/db'
import { insertRows as insertMany } from '../../../core/db/bulk'
import { deleteInSlices } from '../../../core/db/slices'
import { type Derivation, type Gathered as RollupBatch, type Stored, signOf } from '../../../core/derive'
import { addCapped, cappedSql } from '../../../core/event-bounds'
import type { LogEvent as NormEvent, Pause } from '../../../core/event-log-types'
import { MINUTE, floorTo } from '../lib/time'

/** game, env, minute, events: one row per key, keys in order. */
export type MinuteRows = Param[]

const TABLE = { name: 'analytics_minute', bigint: ['minute', 'events', 'revenue_cents'] }
const COLS = ['game_id', 'env', 'minute', 'events', 'revenue_cents']
const TAIL = `ON CONFLICT (game_id, env, minute) DO UPDATE SET events = analytics_minute.events + excluded.events,
  revenue_cents = ${cappedSql('analytics_minute.revenue_cents', 'excluded.revenue_cents')}`

/**
 * Events per minute of event time, per game and environment, for the realtime stream and its
 * series (`analytics_minute`): a consumer of the event log. The gathering half counts a batch's
 * events; the write half adds the revenue of its successful payments (the log holds a retried
 * payment once).
 */
export class MinuteRollup implements Derivation<MinuteRows> {
  readonly name = 'realtime'
  readonly write = writeRealtime
  /** Minutes of event time: the ones from a date on are recomputed exactly. */
  readonly rebuildsFrom = true

  /** It keeps nothing in memory. */
  forget(): void {}

  /** In slices of its key (`LogConsumer.reset`): a month of minutes of many games is many rows. */
  async reset(from: number | undefined, db: Db, pause: Pause): Promise<void> {
    const scope =
      from === undefined
        ? { where: '1 = 1', params: [], pinned: [] }
        : { where: 'minute >= ?', params: [floorTo(from, MINUTE)], pinned: [] }
    await deleteInSlices(db, 'analytics_minute', scope, pause)
  }

  gather(events: readonly NormEvent[]): RollupBatch<MinuteRows> | undefined {
    if (!events.length) return undefined
    // Consecutive events mostly share game, environment and minute: the last counter is reused.
    const counts = new Map<string, [string, string, number, number]>()
    let last: [string, string, number, number] | undefined
    for (let i = 0; i < events.length; i++) {
      const { gameId, env, ts } = events[i]
      const minute = floorTo(ts, MINUTE)
      if (last === undefined || last[2] !== minute || last[0] !== gameId || last[1] !== env) {
        const k = key(gameId, env, minute)
        last = counts.get(k)
        if (!last) {
          last = [gameId, env, minute, 0]
          counts.set(k, last)
        }
      }
      last[3]++
    }
    return { rows: inKeyOrder(counts) }
  }

  /** Minutes past the environment's retention go, like the online sketches. */
  purge(db: Db, s: { gameId: string; env: string }, cutoff: number): Promise<number> {
    return db.run('DELETE FROM analytics_minute WHERE game_id = ? AND env = ? AND minute < ?', [
      s.gameId,
      s.env,
      cutoff,
    ])
  }
}

/** A fixed-width text key that sorts as (game, env, minute). */
const key = (gameId: string, env: string, minute: number) =>
  `${gameId}\u0001${env}\u0001${String(minute).padStart(16, '0')}`

function inKeyOrder(rows: Map<string, Param[]>): Param[] {
  return [...rows.keys()].sort().flatMap((k) => rows.get(k)!)
}

/** The write half: the batch's event counts and the revenue of its successful payments, one upsert in key order. */
async function writeRealtime(tx: Db, rows: MinuteRows, stored: Stored): Promise<void> {
  const paid = await stored.payments
  const merged = new Map<string, Param[]>()
  for (let i = 0; i < rows.length; i += 4)
    merged.set(key(String(rows[i]), String(rows[i + 1]), Number(rows[i + 2])), [
      rows[i],
      rows[i + 1],
      rows[i + 2],
      rows[i + 3],
      0,
    ])
  for (const p of paid) {
    // A client's success a server's superseded is taken off its minute (core/derive.ts `paymentsOf`).
    const sign = signOf(p)
    if (p.status !== 'success' || sign === 0) continue
    const minute = floorTo(Number(p.ts), MINUTE)
    const k = key(String(p.game_id), String(p.env), minute)
    let row = merged.get(k)
    if (!row) {
      row = [String(p.game_id), String(p.env), minute, 0, 0]
      merged.set(k, row)
    }
    row[4] = addCapped(Number(row[4]), sign * Number(p.amount_cents))
  }
  if (merged.size) await insertMany(tx, TABLE, COLS, inKeyOrder(merged), TAIL)
}

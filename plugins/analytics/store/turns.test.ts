import { afterEach, expect, test } from 'bun:test'
import { type Db, migrate } from '../../../core/db'
import type { LogEvent } from '../../../core/event-log-types'
import { rawDb } from '../../../test/helpers'
import { logRow } from '../../../test/log-row'
import { ingestMigrations } from '../../ingest/migrations'
import { migrations } from '../migrations'
import { AnalyticsRollup } from './rollup'

// A large batch is gathered in parts with turns of the event loop between (so a SQLite server
// answers requests meanwhile). A game's time zone may change during a turn: the batch is then
// gathered again, whole, in the new zone, never half in each.

let done: (() => Promise<void>) | undefined
afterEach(async () => {
  await done?.()
  done = undefined
})

const login = (i: number, ts: number): LogEvent =>
  logRow({ id: i + 1, ts, env: 'prod', event: 'login', userId: `u${i}` })

test("a game's time zone changing while a large batch is gathered: the batch is gathered again, whole, in the new zone", async () => {
  const raw = await rawDb('sqlite')
  done = raw.done
  const db: Db = raw.db
  await migrate(db, [
    { plugin: 'ingest', migrations: ingestMigrations },
    { plugin: 'analytics', migrations },
  ])
  let tz = 'UTC'
  const rollup = new AnalyticsRollup(async () => tz)
  await rollup.init(db)
  // 23:30 UTC on 5 January: still the 5th in UTC, the 6th in Tokyo.
  const ts = Date.UTC(2026, 0, 5, 23, 30)
  const events = Array.from({ length: 12_000 }, (_, i) => login(i, ts))
  const gathering = rollup.gather(events)
  // Runs at the first turn the pass takes, after its first part.
  await new Promise<void>((resolve) =>
    setImmediate(() => {
      tz = 'Asia/Tokyo'
      rollup.forgetGame('g')
      resolve()
    }),
  )
  const { rows } = await gathering
  const days = new Map<number, number>()
  for (let i = 0; i < rows.userDays.length; i += 4) {
    const day = rows.userDays[i + 2] as number
    days.set(day, (days.get(day) ?? 0) + 1)
  }
  const sixth = Date.UTC(2026, 0, 6)
  expect([...days]).toEqual([[sixth, 12_000]])
  expect(rows.firstSeen.length / 5).toBe(12_000)
})

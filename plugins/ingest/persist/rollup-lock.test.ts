import { describe, expect, test } from 'bun:test'
import postgres from 'postgres'
import { PG_URL, engines, until } from '../../../test/helpers'
import { analyticsTables } from '../../analytics/store/testing'
import { emptyCommit, migratedStore } from '../testing'
import { ROLLUP_LOCK, persist } from './persist'

/**
 * PostgreSQL: concurrent commits take the rows every commit shares under one advisory lock, so
 * rollups whose statements reach the server in different orders cannot deadlock (each deadlock
 * cost its commits PostgreSQL's `deadlock_timeout`, a second). SQLite has one writer.
 */
if (engines.includes('postgres'))
  describe('[postgres]', () => {
    const store = migratedStore('postgres', [analyticsTables])

    test("a commit's rollup statements wait for the rollup lock, then the commit completes", async () => {
      const holder = postgres(PG_URL, { max: 1, onnotice: () => undefined })
      try {
        await holder`SELECT pg_advisory_lock(${ROLLUP_LOCK})`
        const ts = Date.UTC(2026, 4, 5, 6, 7, 8)
        const minute = ts - (ts % 60_000)
        const c = emptyCommit(ts)
        c.events = {
          firstId: 4242,
          receivedAt: ts,
          streams: ['g-lock', 'prod'],
          cols: [0, 'login', ts, 'u-lock', null, null, null, null, null, null],
          props: ['{}'],
        }
        c.rollups = [['realtime', ['g-lock', 'prod', minute, 1]]]
        let done = false
        const committing = persist(store.db, c).then(() => {
          done = true
        })
        // Its transaction asks for the lock the holder keeps (other test files' commits may wait too).
        await until(
          async () =>
            (
              await holder<{ n: number }[]>`
                SELECT COUNT(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                WHERE l.locktype = 'advisory' AND NOT l.granted AND a.query LIKE '%pg_advisory_xact_lock%'`
            )[0].n > 0,
        )
        expect(done).toBe(false)
        await holder`SELECT pg_advisory_unlock(${ROLLUP_LOCK})`
        await committing
        const row = await store.db.get<{ events: number }>(
          'SELECT events FROM analytics_minute WHERE game_id = ? AND env = ? AND minute = ?',
          ['g-lock', 'prod', minute],
        )
        expect(Number(row?.events)).toBe(1)
      } finally {
        await holder.end()
      }
    })

    test('commits whose rollups reach the server in opposite orders all complete, none a deadlock victim', async () => {
      const ts = Date.UTC(2026, 4, 6, 1, 0, 0)
      const minute = ts - (ts % 60_000)
      const day = ts - (ts % 86_400_000)
      // With payments, the behavior rollup waits for their answer before its day counters, after
      // the realtime rollup's minute; without, it sends them at once, before the minute: the two
      // kinds of commit lock the minute's and the day's rows in opposite orders.
      const commit = (i: number, paid: boolean) => {
        const c = emptyCommit(ts + i)
        c.events = {
          firstId: 10_000 + i,
          receivedAt: ts + i,
          streams: ['g-order', 'prod'],
          cols: [0, 'login', ts, `u-${i}`, null, null, null, null, null, null],
          props: ['{}'],
        }
        if (paid) c.payments = ['g-order', 'prod', `o-${i}`, 'success', 100, 'USD', `u-${i}`, ts, ts + i]
        c.rollups = [
          ['realtime', ['g-order', 'prod', minute, 1]],
          [
            'behavior',
            {
              counters: ['g-order', 'prod', day, 'event', 'login', 1, 0, ts, ts],
              sketches: [],
              spans: [],
              deaths: [],
              payments: paid
                ? ['g-order', 'prod', `o-${i}`, 'success', day, 'gems', 'iap', 'IOS', 'USD']
                : [],
            },
          ],
        ]
        return c
      }
      const results = await Promise.allSettled(
        Array.from({ length: 24 }, (_, i) => persist(store.db, commit(i, i % 2 === 0))),
      )
      expect(
        results
          .filter((r) => r.status === 'rejected')
          .map((r) => String((r as PromiseRejectedResult).reason)),
      ).toEqual([])
      const row = await store.db.get<{ events: number; revenue_cents: number }>(
        'SELECT events, revenue_cents FROM analytics_minute WHERE game_id = ? AND env = ? AND minute = ?',
        ['g-order', 'prod', minute],
      )
      expect([Number(row?.events), Number(row?.revenue_cents)]).toEqual([24, 1200])
    })
  })

import type { MigrationSet } from '../../../core/db'
import type { CommitRows } from '../../ingest/persist/persist'
import { emptyCommit } from '../../ingest/testing'
import { migrations } from '../migrations'
import type { AnalyticsRows } from './rollup'

/** The analytics plugin's tables, for `migratedStore` of the ingest tests. */
export const analyticsTables: MigrationSet = { plugin: 'analytics', migrations }

/** A commit carrying only analytics rollup rows (no writer cache in front, so every row reaches the store). */
export const analyticsCommit = (receivedAt: number, rows: Partial<AnalyticsRows>): CommitRows => ({
  ...emptyCommit(receivedAt),
  rollups: [
    [
      'analytics',
      {
        firstSeen: [],
        userDays: [],
        hours: [],
        hist: [],
        online: [],
        activeDays: [],
        gameDays: [],
        gameHours: [],
        payments: [],
        social: [],
        platforms: [],
        ...rows,
      } satisfies AnalyticsRows,
    ],
  ],
})

import { join } from 'node:path'
import { Type as T } from '@sinclair/typebox'
import { iso } from '../../core/db'
import { definePlugin } from '../../core/plugin'
import m001 from './migrations/001_backups.sql' with { type: 'text' }
import m002 from './migrations/002_instance.sql' with { type: 'text' }
import { backupRoutes } from './routes'
import { backupRunner } from './runner'
import { backupStore } from './store'

/**
 * Spec 3 backups of the store the server is connected to: a consistent online SQLite copy or a
 * pg_dump or mariadb-dump / mysqldump, run in the background, written atomically under DATA_DIR/backups with size and
 * sha256, on a schedule with retention. Restore is outside the API (spec 3): stop the server
 * and replace the SQLite file, or feed the dump to psql or mariadb / mysql.
 */
export default definePlugin({
  name: 'backups',
  config: T.Object(
    {
      /** Where backup files go; default `<data_dir>/backups`. */
      dir: T.Optional(T.String({ minLength: 1 })),
      /** The pg_dump executable (a name on PATH or a path). */
      pg_dump: T.String({ minLength: 1, default: 'pg_dump' }),
      /** The MySQL / MariaDB dump executable; empty: mariadb-dump, else mysqldump, on PATH. */
      mysql_dump: T.String({ default: '' }),
      /** Seconds between scheduled backups; 0 turns the schedule off. Daily by default (spec 3). */
      schedule_interval_s: T.Integer({ minimum: 0, default: 86_400 }),
      /** Keep at most this many succeeded backups; 0: no limit. */
      keep_last: T.Integer({ minimum: 0, default: 0 }),
      /** Remove backups older than this many days; 0: no limit. Spec 3 recommends 30. */
      keep_days: T.Integer({ minimum: 0, default: 30 }),
    },
    { additionalProperties: false, default: {} },
  ),
  migrations: [
    { id: 1, name: 'backups', sql: m001 },
    { id: 2, name: 'instance', sql: m002 },
  ],
  // A backup file holds every password hash and secret of the store: reading it is as sensitive as making it.
  permissions: { backups: { write: ['operator'], read: ['operator'] } },
  setup(ctx) {
    const cfg = ctx.config
    const store = backupStore(ctx.db, ctx.instanceId)
    const runner = backupRunner(ctx.db, store, ctx.log, {
      dir: cfg.dir ?? join(ctx.core.data_dir, 'backups'),
      pgDump: cfg.pg_dump,
      mysqlDump: cfg.mysql_dump,
      keepLast: cfg.keep_last,
      keepDays: cfg.keep_days,
    })
    ctx.health(
      'backups',
      async () => {
        const last = await store.lastSucceeded()
        return { status: 'up', last_succeeded_at: last ? iso(last.completed_at) : null }
      },
      { critical: false },
    )

    ctx.onStart(() => runner.recover())
    // One instance makes each scheduled backup (core's schedule); a slow backup is never
    // overlapped by the next. The job ends once the backup is queued: the backup itself runs on.
    if (cfg.schedule_interval_s > 0)
      ctx.schedule('backups.scheduled', cfg.schedule_interval_s * 1000, async () => {
        if (await store.busy(cfg.schedule_interval_s * 1000)) return
        const low = await runner.lowSpace()
        if (low) return void ctx.log.error('scheduled backup skipped', { reason: low })
        // The check again with the insert, as one step (store.claim): an API request may be claiming now.
        const row = await store.claim(cfg.schedule_interval_s * 1000, {
          name: 'scheduled',
          type: 'full',
          driver: runner.driver,
          trigger: 'schedule',
        })
        if (row) void runner.enqueue(row)
      })
    ctx.onStop(() => runner.stop())
    return backupRoutes(ctx, store, runner)
  },
})

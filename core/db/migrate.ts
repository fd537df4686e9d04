import { convertPaddedTables } from './mysql'
import { keyedColumns, mysqlDdl } from './mysql-sql'
import type { Db, Migration } from './types'

export class MigrationError extends Error {}

export interface MigrationSet {
  plugin: string
  migrations: readonly Migration[]
}

const LEDGER = `CREATE TABLE IF NOT EXISTS liveops_migrations (
  plugin TEXT NOT NULL,
  id INTEGER NOT NULL,
  name TEXT NOT NULL,
  checksum TEXT NOT NULL,
  applied_at BIGINT NOT NULL,
  PRIMARY KEY (plugin, id)
)`

// Arbitrary constant shared by every liveops instance on one PostgreSQL database.
const ADVISORY_LOCK = 72_410_001
/**
 * Takes a lock held to the transaction's end, where several writers can race (SQLite's one writer
 * needs none): PostgreSQL's advisory lock `pg`; MySQL's named lock `mysql`, waiting up to `waitS`,
 * released by the transaction's end too (core/db/mysql.ts). The PostgreSQL keys in use, each
 * with its MySQL name beside it: 72_410_001 migrations, 002 usernames (core/auth/users.ts), 003
 * certificates and 004 certificate alert rules (plugins/certificates/store.ts), 005 backups
 * (plugins/backups/store.ts), 006 SDK keys (core/auth/sdk-keys.ts), and the caps counted by `atCap`
 * (core/db/room.ts): 007 rosters, 008 rule groups, 009 rate-limit sets, 010 agents, 011 ops alert
 * rules. A new lock takes the next.
 */
export async function lockUntilCommit(tx: Db, lock: { pg: number; mysql: string; waitS: number }) {
  if (tx.dialect === 'postgres') await tx.get('SELECT pg_advisory_xact_lock(?)', [lock.pg])
  else if (tx.dialect === 'mysql') await tx.get(`SELECT GET_LOCK(?, ${lock.waitS}) AS got`, [lock.mysql])
}

/**
 * One migrator at a time. MySQL commits each DDL statement by itself, so there a failed migration
 * leaves the statements before the failing one applied (and is not in the ledger).
 */
const MIGRATION_LOCK = { pg: ADVISORY_LOCK, mysql: 'liveops_migrations', waitS: 60 }

/**
 * The SQL a migration runs on this engine. SQLite's `INTEGER PRIMARY KEY` is a 64-bit rowid;
 * on PostgreSQL the same column is `BIGINT PRIMARY KEY`, so one portable file serves both.
 */
export function migrationSql(db: Db, m: Migration, keyed: ReadonlySet<string> = new Set()): string {
  if (db.dialect === 'mysql') return m.mysql ?? mysqlDdl(m.sql, keyed)
  if (db.dialect !== 'postgres') return m.sql
  return m.pg ?? m.sql.replace(/\bINTEGER PRIMARY KEY\b/gi, 'BIGINT PRIMARY KEY')
}

/**
 * The text a migration's checksum covers: what runs, except on MySQL, where it is the portable
 * text the translation starts from (the translation sees every migration's indexes, so a later
 * migration may change how an earlier one reads; an applied one is never run again).
 */
function checksum(db: Db, m: Migration): string {
  const text = db.dialect === 'mysql' ? (m.mysql ?? m.sql) : migrationSql(db, m)
  return new Bun.CryptoHasher('sha256').update(text.replace(/\r\n/g, '\n').trim()).digest('hex')
}

/**
 * Applies every pending migration of every plugin in one transaction, after checking that no
 * applied migration was edited. On PostgreSQL an advisory lock keeps two instances starting at
 * once from racing.
 */
export async function migrate(db: Db, sets: readonly MigrationSet[]): Promise<string[]> {
  for (const set of sets)
    set.migrations.reduce((last, m) => {
      if (!(m.id > last))
        throw new MigrationError(`${set.plugin}: migration ids must increase (${m.id} after ${last})`)
      return m.id
    }, 0)
  await db.exec(migrationSql(db, { id: 0, name: 'ledger', sql: LEDGER }, keyedColumns([LEDGER])))
  const done = await db.tx(async (tx) => {
    await lockUntilCommit(tx, MIGRATION_LOCK)
    const keyed = keyedColumns(sets.flatMap((s) => s.migrations.map((m) => m.mysql ?? m.sql)))
    const rows = await tx.all<{ plugin: string; id: number; name: string; checksum: string }>(
      'SELECT plugin, id, name, checksum FROM liveops_migrations',
    )
    const applied = new Map(rows.map((r) => [`${r.plugin}/${r.id}`, r]))
    const done: string[] = []
    for (const set of sets) {
      for (const m of set.migrations) {
        const sum = checksum(tx, m)
        const prior = applied.get(`${set.plugin}/${m.id}`)
        if (prior) {
          if (prior.checksum !== sum)
            throw new MigrationError(
              `migration ${set.plugin}/${String(m.id).padStart(3, '0')}_${m.name} was edited after it was applied ` +
                `(ledger checksum ${prior.checksum.slice(0, 12)}, file ${sum.slice(0, 12)}); add a new migration instead`,
            )
          continue
        }
        await tx.exec(migrationSql(tx, m, keyed))
        await tx.run(
          'INSERT INTO liveops_migrations (plugin, id, name, checksum, applied_at) VALUES (?, ?, ?, ?, ?)',
          [set.plugin, m.id, m.name, sum, Date.now()],
        )
        done.push(`${set.plugin}/${m.id}`)
      }
    }
    return done
  })
  if (db.dialect === 'mysql') await convertPaddedTables(db)
  return done
}

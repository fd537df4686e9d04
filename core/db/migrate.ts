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
 * The SQL a migration runs on this engine. SQLite's `INTEGER PRIMARY KEY` is a 64-bit rowid;
 * on PostgreSQL the same column is `BIGINT PRIMARY KEY`, so one portable file serves both.
 */
export function migrationSql(db: Db, m: Migration): string {
  if (db.dialect !== 'postgres') return m.sql
  return m.pg ?? m.sql.replace(/\bINTEGER PRIMARY KEY\b/gi, 'BIGINT PRIMARY KEY')
}

function checksum(db: Db, m: Migration): string {
  const text = migrationSql(db, m)
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
  await db.exec(LEDGER)
  return db.tx(async (tx) => {
    if (tx.dialect === 'postgres') await tx.get('SELECT pg_advisory_xact_lock(?)', [ADVISORY_LOCK])
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
        await tx.exec(migrationSql(tx, m))
        await tx.run(
          'INSERT INTO liveops_migrations (plugin, id, name, checksum, applied_at) VALUES (?, ?, ?, ?, ?)',
          [set.plugin, m.id, m.name, sum, Date.now()],
        )
        done.push(`${set.plugin}/${m.id}`)
      }
    }
    return done
  })
}

import { tmpdir } from 'node:os'
import mysql from 'mysql2/promise'
import { orderPlugins } from '../core/app'
import { type Db, type MigrationSet, migrate, openDb } from '../core/db'
import { migrationSql } from '../core/db/migrate'
import { keyedColumns } from '../core/db/mysql-sql'
import { migrationSets } from '../core/migration-sets'
import type { PluginManifest } from '../core/plugin'
import { REGISTRY, ownerId, sweepOnce } from './mysql-sweep'

/**
 * Test databases on MySQL/MariaDB. A server creates and removes one InnoDB file per table, each
 * synced to disk: an app's ~80 tables cost seconds to migrate and to drop, one at a time. So the
 * tests migrate once per set of migrations into a template database (`lt_<hash>`, shared by every
 * test process and run on the server, rebuilt when a migration or its translation changes) and
 * give each app a copy of it: the template's tables created over several connections at once
 * from its `SHOW CREATE TABLE`, its rows (the ledger, seeded rows) copied. The app then migrates
 * as always: it checks every checksum against the copied ledger and finds nothing to apply.
 * Only the test helper does this; a server's own migrations run as written (core/db/migrate.ts).
 */
const CONNECTIONS = 4

export const MYSQL_URL = process.env.TEST_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test'

/** The URL of another database on the server of `url`. */
function withDatabase(url: string, name: string): string {
  const u = new URL(url)
  u.pathname = `/${name}`
  return u.toString()
}

function connect(url: string): Promise<mysql.Connection> {
  return mysql.createConnection({ uri: url, multipleStatements: true })
}

interface TableStatement {
  table: string
  sql: string
  /** The tables its FOREIGN KEYs name (or that name it). */
  related: readonly string[]
}

/**
 * Runs the statements spread over CONNECTIONS connections to `url`, each its share in one round
 * trip. Tables a FOREIGN KEY ties are created and dropped by one connection: InnoDB refuses two
 * such DDL statements at once ("Lock wait timeout").
 */
async function spread(url: string, statements: readonly TableStatement[], prefix = ''): Promise<void> {
  const group = new Map<string, string>()
  const find = (t: string): string => {
    const up = group.get(t) ?? t
    return up === t ? t : find(up)
  }
  for (const s of statements) for (const r of s.related) group.set(find(r), find(s.table))
  const groups = new Map<string, string[]>()
  for (const s of statements) {
    const g = find(s.table)
    groups.set(g, [...(groups.get(g) ?? []), s.sql])
  }
  const shares: string[][] = Array.from({ length: Math.min(CONNECTIONS, groups.size) }, () => [])
  for (const g of [...groups.values()].sort((x, y) => y.length - x.length))
    shares.reduce((least, share) => (share.length < least.length ? share : least)).push(...g)
  await Promise.all(
    shares.map(async (mine) => {
      const c = await connect(url)
      try {
        await c.query(prefix + mine.join(';\n'))
      } finally {
        await c.end()
      }
    }),
  )
}

/** Drops a database's tables over several connections, then the database. */
export async function dropMysqlDb(url: string, name: string): Promise<void> {
  const c = await connect(url)
  try {
    const [rows] = await c.query(
      'SELECT table_name AS t FROM information_schema.tables WHERE table_schema = ?',
      [name],
    )
    const [keys] = (await c.query(
      'SELECT table_name AS t, referenced_table_name AS r FROM information_schema.referential_constraints WHERE constraint_schema = ?',
      [name],
    )) as unknown as [Array<{ t: string; r: string }>]
    const tables = (rows as Array<{ t: string }>).map(({ t }) => ({
      table: t,
      sql: `DROP TABLE IF EXISTS \`${name}\`.\`${t}\``,
      related: keys.flatMap((k) => (k.t === t ? [k.r] : k.r === t ? [k.t] : [])),
    }))
    if (tables.length) await spread(url, tables, 'SET SESSION foreign_key_checks = 0;\n')
    await c.query(`DROP DATABASE IF EXISTS ${name}`)
  } finally {
    await c.end()
  }
}

export interface MysqlTestDb {
  url: string
  name: string
  drop: () => Promise<void>
}

/** A fresh, empty MySQL database, uniquely named; dropped again by `drop()`. */
export async function freshMysqlDb(url = MYSQL_URL): Promise<MysqlTestDb> {
  // Named after this process's owner lock (test/mysql-sweep.ts): left over, it is dropped by a later run.
  const name = `t_${await ownerId(url)}_${crypto.randomUUID().replace(/-/g, '').slice(0, 8)}`
  const admin = await connect(url)
  try {
    await admin.query(`CREATE DATABASE ${name} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`)
  } finally {
    await admin.end()
  }
  return { url: withDatabase(url, name), name, drop: () => dropMysqlDb(url, name) }
}

interface Template {
  name: string
  tables: Array<{ table: string; create: string; related: string[]; copy?: string; autoIncrement: boolean }>
}

/** What the migrations run on MySQL, translated: the template's name is a hash of it. */
function templateName(sets: readonly MigrationSet[]): string {
  const my = { dialect: 'mysql' } as Db
  const keyed = keyedColumns(sets.flatMap((s) => s.migrations.map((m) => m.mysql ?? m.sql)))
  const h = new Bun.CryptoHasher('sha256')
  // What the driver makes of the text too: templates built before tables became NO PAD (core/db/mysql.ts) are not reused.
  h.update('tables: no pad\n')
  for (const s of sets)
    for (const m of s.migrations) h.update(`${s.plugin}/${m.id}/${m.name}\n${migrationSql(my, m, keyed)}\n`)
  return `lt_${h.digest('hex').slice(0, 24)}`
}

/**
 * The template of these migrations: built by the first process that needs it (under a named
 * lock: the others wait), complete when its ledger holds every migration (a builder that died
 * half-way leaves one that is built again).
 */
async function buildTemplate(url: string, sets: readonly MigrationSet[]): Promise<Template> {
  const name = templateName(sets)
  const c = await connect(url)
  try {
    const [[got]] = (await c.query('SELECT GET_LOCK(?, 300) AS got', [name])) as unknown as [
      [{ got: number }],
    ]
    if (Number(got?.got) !== 1) throw new Error(`template ${name}: lock not granted`)
    // Its use recorded under its lock: a sweep reads it again under the same lock before dropping.
    await c.query(
      `CREATE TABLE IF NOT EXISTS ${REGISTRY} (name VARCHAR(64) PRIMARY KEY, last_used BIGINT NOT NULL); ${touch(url, name)}`,
    )
    const expected = sets.reduce((n, s) => n + s.migrations.length, 0)
    const [have] = (await c.query(
      'SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_schema = ? AND table_name = ?',
      [name, 'liveops_migrations'],
    )) as unknown as [[{ n: number }]]
    let ready = false
    if (Number(have[0]?.n) === 1) {
      const [[r]] = (await c.query(
        `SELECT COUNT(*) AS n FROM \`${name}\`.liveops_migrations`,
      )) as unknown as [[{ n: number }]]
      ready = Number(r?.n) === expected
    }
    if (!ready) {
      await dropMysqlDb(url, name)
      await c.query(`CREATE DATABASE ${name} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`)
      const db = openDb(withDatabase(url, name), tmpdir(), { max: 1 })
      try {
        await migrate(db, sets)
      } finally {
        await db.close()
      }
    }
    const [rows] = await c.query(
      'SELECT table_name AS t FROM information_schema.tables WHERE table_schema = ?',
      [name],
    )
    // One round trip for every table's definition and row count, one more for the columns.
    const names = (rows as Array<{ t: string }>).map((r) => r.t)
    const [shown] = (await c.query(
      names.map((t) => `SHOW CREATE TABLE \`${name}\`.\`${t}\``).join(';\n'),
    )) as unknown as [Array<[{ 'Create Table': string }]>]
    const [counts] = (await c.query(
      names.map((t) => `SELECT '${t}' AS t, COUNT(*) AS n FROM \`${name}\`.\`${t}\``).join(' UNION ALL '),
    )) as unknown as [Array<{ t: string; n: number }>]
    // Generated columns are computed again, not copied.
    const [cols] = (await c.query(
      `SELECT table_name AS t, column_name AS c, extra AS x FROM information_schema.columns
        WHERE table_schema = ? ORDER BY table_name, ordinal_position`,
      [name],
    )) as unknown as [Array<{ t: string; c: string; x: string }>]
    const tables: Template['tables'] = names.map((t, i) => {
      const list = cols
        .filter((x) => x.t === t && !/GENERATED/i.test(x.x))
        .map((x) => `\`${x.c}\``)
        .join(', ')
      const copy =
        Number(counts.find((x) => x.t === t)?.n) > 0
          ? `INSERT INTO \`${t}\` (${list}) SELECT ${list} FROM \`${name}\`.\`${t}\``
          : undefined
      const one = names.length === 1 ? (shown as unknown as [{ 'Create Table': string }]) : shown[i]!
      const create = one[0]['Create Table']
      return {
        table: t,
        create,
        related: [...create.matchAll(/REFERENCES `(\w+)`/g)].map((m) => m[1] ?? ''),
        copy,
        autoIncrement: cols.some((x) => x.t === t && /auto_increment/i.test(x.x)),
      }
    })
    return { name, tables }
  } finally {
    await c.query('DO RELEASE_ALL_LOCKS()').catch(() => undefined)
    await c.end()
  }
}

const templates = new Map<string, Promise<Template | undefined>>()

/** Databases of this process that an app used and gave back, reset, with the shape they had new. */
const spares = new Map<string, Array<{ db: MysqlTestDb; shape: string }>>()

/** The database of `url`, which holds the templates' registry (test/mysql-sweep.ts). */
const registry = (url: string) => `\`${new URL(url).pathname.slice(1) || 'test'}\`.${REGISTRY}`
const touch = (url: string, template: string) =>
  `INSERT INTO ${registry(url)} (name, last_used) VALUES ('${template}', ${Date.now()}) ON DUPLICATE KEY UPDATE last_used = VALUES(last_used)`

/** A database's tables, columns and indexes, hashed: one a test altered is not used again. */
async function shapeOf(c: mysql.Connection, name: string): Promise<string> {
  const [rows] = (await c.query(
    `SELECT CONCAT_WS(' ', table_name, column_name, column_type, is_nullable, IFNULL(column_default, '-'), extra) AS x
       FROM information_schema.columns WHERE table_schema = ?
     UNION ALL
     SELECT CONCAT_WS(' ', table_name, index_name, seq_in_index, column_name, non_unique)
       FROM information_schema.statistics WHERE table_schema = ?`,
    [name, name],
  )) as unknown as [Array<{ x: string }>]
  const h = new Bun.CryptoHasher('sha256')
  for (const x of rows.map((r) => r.x).sort()) h.update(`${x}\n`)
  return h.digest('hex')
}

/**
 * Makes a used database as new again, in one round trip: the tables holding rows emptied and
 * the template's rows copied back, in one transaction (one commit to sync, where dropping and
 * creating ~80 tables syncs and unlinks a file for each), AUTO_INCREMENT counters set back.
 * False (the database is then dropped) when its shape changed or anything fails.
 */
async function reset(db: MysqlTestDb, template: Template, shape: string, url: string): Promise<boolean> {
  const c = await connect(db.url)
  try {
    if ((await shapeOf(c, db.name)) !== shape) return false
    const [filled] = (await c.query(
      template.tables
        .map((t) => `SELECT '${t.table}' AS t FROM DUAL WHERE EXISTS (SELECT 1 FROM \`${t.table}\`)`)
        .join(' UNION ALL '),
    )) as unknown as [Array<{ t: string }>]
    const used = new Set(filled.map((r) => r.t))
    const counter = (create: string) => /AUTO_INCREMENT=(\d+)/.exec(create)?.[1] ?? '1'
    await c.query(
      [
        'SET SESSION foreign_key_checks = 0',
        'START TRANSACTION',
        ...template.tables.filter((t) => used.has(t.table)).map((t) => `DELETE FROM \`${t.table}\``),
        ...template.tables.flatMap((t) => (t.copy ? [t.copy] : [])),
        touch(url, template.name),
        'COMMIT',
        ...template.tables
          .filter((t) => t.autoIncrement && used.has(t.table))
          .map((t) => `ALTER TABLE \`${t.table}\` AUTO_INCREMENT = ${counter(t.create)}`),
      ].join(';\n'),
    )
    return true
  } catch {
    return false
  } finally {
    await c.end().catch(() => undefined)
  }
}

/**
 * A fresh database already migrated for an app of these plugins: a copy of their template, or
 * one this process made before and got back (reset as new, test/mysql-sweep.ts drops what a
 * process leaves). Undefined when the plugins cannot be ordered or their migrations fail: the
 * app then starts on an empty database and meets the error itself.
 */
export async function migratedMysqlDb(
  app: { enabled: string[]; known: Record<string, PluginManifest> } | undefined,
  url = MYSQL_URL,
): Promise<MysqlTestDb | undefined> {
  if (!app) return undefined
  let sets: MigrationSet[]
  try {
    sets = migrationSets(orderPlugins(app.enabled, app.known))
  } catch {
    return undefined
  }
  const key = templateName(sets)
  let pending = templates.get(key)
  if (!pending) {
    pending = buildTemplate(url, sets).catch(() => undefined)
    templates.set(key, pending)
  }
  const template = await pending
  if (!template) return undefined
  void sweepOnce(url, key, dropMysqlDb)
  const pool = spares.get(key) ?? []
  spares.set(key, pool)
  const lend = ({ db, shape }: { db: MysqlTestDb; shape: string }): MysqlTestDb => ({
    ...db,
    drop: async () => {
      if (await reset(db, template, shape, url)) pool.push({ db, shape })
      else await db.drop()
    },
  })
  const spare = pool.pop()
  if (spare) return lend(spare)
  const fresh = await freshMysqlDb(url)
  try {
    // A table may name another one (FOREIGN KEY) created by another connection.
    await spread(
      fresh.url,
      template.tables.map((t) => ({ table: t.table, sql: t.create, related: t.related })),
      'SET SESSION foreign_key_checks = 0;\n',
    )
    const c = await connect(fresh.url)
    try {
      const copies = template.tables.flatMap((t) => (t.copy ? [t.copy] : []))
      await c.query([...copies, touch(url, template.name)].join(';\n'))
      return lend({ db: fresh, shape: await shapeOf(c, fresh.name) })
    } finally {
      await c.end()
    }
  } catch (e) {
    await fresh.drop()
    throw e
  }
}

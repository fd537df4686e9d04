import { tmpdir } from 'node:os'
import postgres from 'postgres'
import { orderPlugins } from '../core/app'
import { type MigrationSet, migrate, openDb } from '../core/db'
import { migrationSql } from '../core/db/migrate'
import { migrationSets } from '../core/migration-sets'
import type { PluginManifest } from '../core/plugin'
import { PG_URL, pgUrlWith } from './pg-db'

/**
 * Test stores on PostgreSQL copied from a migrated template, as test/mysql-db.ts does for MySQL.
 * Making a fresh schema and running every plugin's migrations in it cost ~1.0-1.2 s an app, and
 * dropping it ~0.2-0.4 s; a database created from a migrated template (WAL_LOG, PostgreSQL 15's
 * default strategy; FILE_COPY took ~270 ms) has the catalog and rows in ~60 ms, and dropping it
 * takes ~40 ms.
 *
 * - The template (`lt_<hash>`, a hash of what the migrations run on PostgreSQL) is built once per
 *   set of migrations on PG_URL's server and kept between runs: by the first process that needs
 *   it, under an advisory lock (the others wait), migrated in a database of its own (`lb_<hash>`)
 *   and renamed to its name only when complete, then closed to connections (a template must have
 *   none while it is copied). Its store is the schema SCHEMA.
 * - Each app's store is a copy (`t_<owner>_<random>`, schema SCHEMA): the app migrates as always,
 *   checks every checksum against the copied ledger and finds nothing to apply. A server's own
 *   migrations run as written (core/db/migrate.ts); only the test helper copies.
 * - Owners: each process keeps one connection to PG_URL named `lo_<owner>` (application_name)
 *   for as long as it lives; a copy whose owner has no such connection and that nobody is
 *   connected to is left over. The first template a process meets starts a sweep (one process at
 *   a time) that drops those, half-built templates nobody is building, and templates of another
 *   hash no app used for TEMPLATE_IDLE_MS (their last use is recorded in REGISTRY, in PG_URL's
 *   database, and read again under the template's lock before the drop).
 */
export const SCHEMA = 't_app'
const TEMPLATE_IDLE_MS = 20 * 60_000
const REGISTRY = 'lt_registry'
/** Advisory lock keys (two int4, the class first): templates by their hash, the sweep, the registry. */
const LOCKS = 72_410_100
const SWEEP = 1
const REGISTRY_LOCK = 2

const owner = crypto.randomUUID().replace(/-/g, '').slice(0, 12)
let admin: postgres.Sql | undefined

/**
 * This process's connections to PG_URL (its owner mark): never closed before the process ends,
 * no lifetime limit (postgres.js would otherwise end one after 30-60 minutes).
 */
function adminSql(): postgres.Sql {
  admin ??= postgres(PG_URL, {
    max: 3,
    max_lifetime: 0,
    onnotice: () => undefined,
    connection: { application_name: `lo_${owner}` },
  })
  return admin
}

/** The template's name: a hash of the migrations as they run on PostgreSQL, and of this layout. */
function templateName(sets: readonly MigrationSet[]): string {
  const pg = { dialect: 'postgres' } as Parameters<typeof migrationSql>[0]
  const h = new Bun.CryptoHasher('sha256')
  h.update(`pg template 1, schema ${SCHEMA}\n`)
  for (const s of sets)
    for (const m of s.migrations) h.update(`${s.plugin}/${m.id}/${m.name}\n${migrationSql(pg, m)}\n`)
  return `lt_${h.digest('hex').slice(0, 24)}`
}

/** The int4 a template's lock is keyed by. */
const lockKey = (name: string) => Number.parseInt(name.slice(3, 10), 16)

async function exists(sql: postgres.Sql, name: string): Promise<boolean> {
  const [row] = await sql`SELECT 1 AS x FROM pg_database WHERE datname = ${name}`
  return Boolean(row)
}

/** Takes a session advisory lock, polling (the connection stays free for this process's other queries). */
async function lock(sql: postgres.Sql, key: number, waitMs: number): Promise<postgres.ReservedSql> {
  const held = await sql.reserve()
  const deadline = Date.now() + waitMs
  for (;;) {
    const [r] = await held`SELECT pg_try_advisory_lock(${LOCKS}, ${key}) AS got`
    if (r?.got) return held
    if (Date.now() > deadline) {
      held.release()
      throw new Error(`test template lock ${key}: not granted within ${waitMs} ms`)
    }
    await Bun.sleep(50)
  }
}

async function unlock(held: postgres.ReservedSql, key: number): Promise<void> {
  try {
    await held`SELECT pg_advisory_unlock(${LOCKS}, ${key})`
  } finally {
    held.release()
  }
}

let registry: Promise<void> | undefined
/** The registry table, made once (under a lock: two CREATE TABLE IF NOT EXISTS at once can collide). */
function ensureRegistry(): Promise<void> {
  registry ??= adminSql()
    .begin(async (tx) => {
      await tx`SELECT pg_advisory_xact_lock(${LOCKS}, ${REGISTRY_LOCK})`
      await tx.unsafe(
        `CREATE TABLE IF NOT EXISTS ${REGISTRY} (name TEXT PRIMARY KEY, last_used BIGINT NOT NULL)`,
      )
    })
    .then(() => undefined)
  return registry
}

async function touch(sql: postgres.Sql, name: string): Promise<void> {
  await ensureRegistry()
  await sql.unsafe(
    `INSERT INTO ${REGISTRY} (name, last_used) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET last_used = EXCLUDED.last_used`,
    [name, Date.now()],
  )
}

/** Builds the template of these migrations unless it exists (under its lock). */
async function buildTemplate(sets: readonly MigrationSet[]): Promise<string> {
  const sql = adminSql()
  const name = templateName(sets)
  const key = lockKey(name)
  if (await exists(sql, name)) return name
  const held = await lock(sql, key, 300_000)
  try {
    // Recorded before it exists: a sweep never takes a template being built for unrecorded.
    await touch(held, name)
    if (await exists(held, name)) return name
    const building = `lb_${name.slice(3)}`
    // A builder that died half-way left this; nobody else builds under the lock.
    await held.unsafe(`DROP DATABASE IF EXISTS ${building} WITH (FORCE)`)
    await held.unsafe(`CREATE DATABASE ${building}`)
    const db = openDb(pgUrlWith({ database: building }), tmpdir(), { max: 1 })
    try {
      await db.exec(`CREATE SCHEMA ${SCHEMA}`)
    } finally {
      await db.close()
    }
    const store = openDb(pgUrlWith({ database: building }), tmpdir(), { schema: SCHEMA, max: 1 })
    try {
      await migrate(store, sets)
    } finally {
      await store.close()
    }
    await held.unsafe(`ALTER DATABASE ${building} RENAME TO ${name}`)
    // Nobody connects to it again: a copy fails while anyone is connected to its template.
    await held.unsafe(`ALTER DATABASE ${name} WITH ALLOW_CONNECTIONS false`)
    return name
  } finally {
    await unlock(held, key)
  }
}

const templates = new Map<string, Promise<string | undefined>>()
const touched = new Map<string, number>()

/** The template of these migrations, built (or found) once per process; undefined when migrating fails. */
function templateFor(sets: readonly MigrationSet[]): Promise<string | undefined> {
  const key = templateName(sets)
  let pending = templates.get(key)
  if (!pending) {
    pending = buildTemplate(sets).catch(() => undefined)
    templates.set(key, pending)
  }
  return pending
}

export interface PgTestStore {
  /** The URL of its database. */
  url: string
  schema: string
  drop: () => Promise<void>
}

/**
 * A store already migrated for an app of these plugins: a new database copied from their
 * template. Undefined when the plugins cannot be ordered or their migrations fail: the caller
 * then gives the app a fresh schema, where it meets the error itself.
 */
export async function migratedPgStore(
  app: { enabled: string[]; known: Record<string, PluginManifest> } | undefined,
): Promise<PgTestStore | undefined> {
  if (!app) return undefined
  let sets: MigrationSet[]
  try {
    sets = migrationSets(orderPlugins(app.enabled, app.known))
  } catch {
    return undefined
  }
  let template = await templateFor(sets)
  if (!template) return undefined
  const sql = adminSql()
  void sweepOnce(sql, template)
  const name = `t_${owner}_${crypto.randomUUID().replace(/-/g, '').slice(0, 8)}`
  for (let attempt = 1; ; attempt++) {
    try {
      // Its last use, at most once a minute a process: the sweep keeps what ran in the last 20.
      if (Date.now() - (touched.get(template) ?? 0) > 60_000) {
        touched.set(template, Date.now())
        await touch(sql, template)
      }
      await sql.unsafe(`CREATE DATABASE ${name} TEMPLATE ${template}`)
      break
    } catch (e) {
      const code = (e as { code?: string }).code
      if (attempt >= 3) throw e
      if (code === '3D000') {
        // Swept by another process since this one found it (idle for 20 minutes): built again.
        templates.delete(templateName(sets))
        touched.delete(template)
        template = await templateFor(sets)
        if (!template) throw e
      } else if (code !== '55006') throw e
      // 55006: someone was connected to the template (or copying it with FILE_COPY): again.
      await Bun.sleep(100 * attempt)
    }
  }
  return {
    url: pgUrlWith({ database: name }),
    schema: SCHEMA,
    drop: async () => {
      await sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    },
  }
}

let swept: Promise<void> | undefined
function sweepOnce(sql: postgres.Sql, current: string): Promise<void> {
  swept ??= sweep(sql, current).catch(() => undefined)
  return swept
}

/** Drops what no live process owns (see the top of this file); never while another sweep runs. */
async function sweep(sql: postgres.Sql, current: string): Promise<void> {
  const held = await sql.reserve()
  try {
    const [got] = await held`SELECT pg_try_advisory_lock(${LOCKS}, ${SWEEP}) AS got`
    if (!got?.got) return
    try {
      const copies = await held<{ name: string }[]>`
        SELECT d.datname AS name FROM pg_database d
         WHERE d.datname ~ '^t_[0-9a-f]{12}_[0-9a-f]{8}$'
           AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.application_name = 'lo_' || substr(d.datname, 3, 12))
           AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = d.datname)`
      // Without FORCE: should anyone connect to it meanwhile, it stays.
      for (const { name } of copies)
        await held.unsafe(`DROP DATABASE IF EXISTS ${name}`).catch(() => undefined)
      await ensureRegistry()
      const built = await held<{ name: string }[]>`
        SELECT datname AS name FROM pg_database WHERE datname ~ '^l[tb]_[0-9a-f]{24}$'`
      for (const { name } of built) {
        const template = `lt_${name.slice(3)}`
        if (template === current) continue
        const key = lockKey(template)
        const [mine] = await held`SELECT pg_try_advisory_lock(${LOCKS}, ${key}) AS got`
        // Its builder holds the lock (or this process's own build does): left alone.
        if (!mine?.got) continue
        try {
          const [r] = await held.unsafe(`SELECT MAX(last_used) AS used FROM ${REGISTRY} WHERE name = $1`, [
            template,
          ])
          const used = r?.used == null ? 0 : Number(r.used)
          if (name.startsWith('lb_') || Date.now() - used > TEMPLATE_IDLE_MS) {
            await held.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
            if (name.startsWith('lt_'))
              await held.unsafe(`DELETE FROM ${REGISTRY} WHERE name = $1`, [template])
          }
        } finally {
          await held`SELECT pg_advisory_unlock(${LOCKS}, ${key})`
        }
      }
    } finally {
      await held`SELECT pg_advisory_unlock(${LOCKS}, ${SWEEP})`
    }
  } finally {
    held.release()
  }
}

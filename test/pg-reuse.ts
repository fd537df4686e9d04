import postgres from 'postgres'

/**
 * What a PostgreSQL test store looks like as new (test/pg-template.ts), and making a used one so
 * again. Dropping a database costs a checkpoint of the whole server (PostgreSQL 15 requests one,
 * and waits for it, on every DROP DATABASE), which under a suite's load took ~1 s a drop (p90 3.2
 * s); emptying the few tables a test wrote and setting sequences back takes a fraction of that.
 */
export interface StoreFacts {
  /** The store's tables (its schema's). */
  tables: string[]
  /** The rows the migrations left (the ledger, seeded rows), as JSON, and their hash. */
  seeds: Record<string, { rows: string; hash: string }>
  /** Each sequence's last value (null: never used). */
  sequences: Record<string, number | null>
  /** A hash of the relations (tables, indexes, sequences) of every user schema, their columns and constraints. */
  shape: string
}

const quote = (name: string) => `"${name.replace(/"/g, '""')}"`
const literal = (text: string) => `'${text.replace(/'/g, "''")}'`

/** The rows of a table as one hash (empty: ''). */
const rowsHash = (t: string) =>
  `(SELECT coalesce(md5(string_agg(x::text, E'\\n' ORDER BY x::text)), '') FROM ${quote(t)} x)`

const SHAPE = `SELECT coalesce(md5(string_agg(x, E'\\n' ORDER BY x)), '') AS shape FROM (
    SELECT c.relnamespace::text || ' ' || c.relname || ' ' || c.relkind::text || ' ' || coalesce(a.attname || ' ' ||
           a.atttypid::text || ' ' || a.atttypmod::text || ' ' || a.attnotnull::text || ' ' || a.atthasdef::text, '') AS x
      FROM pg_class c LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
     WHERE c.relnamespace >= 16384
    UNION ALL
    SELECT conrelid::text || ' ' || conname || ' ' || contype::text FROM pg_constraint WHERE connamespace >= 16384) s`

const SEQUENCES = `SELECT coalesce(json_object_agg(schemaname || '.' || sequencename, last_value), '{}') AS seqs
  FROM pg_sequences WHERE schemaname NOT IN ('pg_catalog', 'information_schema')`

/** What the facts are made of: a template whose facts were read otherwise is built again (test/pg-template.ts). */
export const FACTS_FORM = new Bun.CryptoHasher('sha256')
  .update(`${SHAPE}\n${SEQUENCES}\n${rowsHash('t')}`)
  .digest('hex')
  .slice(0, 16)

/** Reads what a store looks like (one that was just migrated, or copied from its template). */
export async function readFacts(url: string, schema: string): Promise<StoreFacts> {
  const sql = postgres(url, { max: 1, onnotice: () => undefined, connection: { search_path: schema } })
  try {
    const tables = (
      await sql<
        { t: string }[]
      >`SELECT c.relname AS t FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = ${schema} AND c.relkind IN ('r', 'p') ORDER BY 1`
    ).map((r) => r.t)
    const seeds: StoreFacts['seeds'] = {}
    for (const t of tables) {
      const [r] = await sql.unsafe(
        `SELECT (SELECT json_agg(x) FROM ${quote(t)} x)::text AS rows, ${rowsHash(t)} AS hash`,
      )
      if (r?.rows) seeds[t] = { rows: r.rows, hash: r.hash }
    }
    const [shape] = await sql.unsafe(SHAPE)
    const [seqs] = await sql.unsafe(SEQUENCES)
    return { tables, seeds, sequences: seqs?.seqs ?? {}, shape: shape?.shape ?? '' }
  } finally {
    await sql.end()
  }
}

/**
 * Makes a used store as new: the tables whose rows differ from the template's emptied (TRUNCATE)
 * and the seeded ones filled again, sequences set back, in one transaction. False, with nothing
 * changed, when its shape differs (a test altered it) or anyone else is connected to it: the
 * caller drops it then.
 */
export async function resetStore(url: string, schema: string, facts: StoreFacts): Promise<boolean> {
  const sql = postgres(url, { max: 1, onnotice: () => undefined, connection: { search_path: schema } })
  try {
    const changed = facts.tables
      .map((t) =>
        facts.seeds[t]
          ? `SELECT ${literal(t)} AS t WHERE ${rowsHash(t)} <> ${literal(facts.seeds[t].hash)}`
          : `SELECT ${literal(t)} AS t WHERE EXISTS (SELECT 1 FROM ${quote(t)})`,
      )
      .join(' UNION ALL ')
    const read = async () =>
      (
        await sql.unsafe(
          `SELECT (${SHAPE}) AS shape, (${SEQUENCES}) AS seqs, ARRAY(${changed || 'SELECT NULL WHERE false'}) AS changed,
                  (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()) AS others`,
        )
      )[0]
    let now = await read()
    // The last app's connections may be a moment from gone (their backends exiting).
    for (let i = 0; i < 10 && Number(now?.others) > 0; i++) {
      await Bun.sleep(30)
      now = await read()
    }
    if (!now || now.shape !== facts.shape || Number(now.others) > 0) return false
    const emptied: string[] = now.changed
    const seqs = now.seqs as Record<string, number | null>
    const statements = [
      ...(emptied.length ? [`TRUNCATE ${emptied.map(quote).join(', ')} CASCADE`] : []),
      // CASCADE may have emptied a seeded table that names an emptied one: every seeded table is checked.
      ...Object.entries(facts.seeds).map(
        ([t, s]) =>
          `INSERT INTO ${quote(t)} SELECT * FROM json_populate_recordset(NULL::${quote(t)}, ${literal(s.rows)})
            WHERE ${rowsHash(t)} = ''`,
      ),
      ...Object.entries(facts.sequences)
        .filter(([s, v]) => seqs[s] !== v)
        .map(([s, v]) =>
          v === null ? `ALTER SEQUENCE ${s} RESTART` : `SELECT setval(${literal(s)}, ${Number(v)}, true)`,
        ),
    ]
    if (!emptied.length && statements.length === Object.keys(facts.seeds).length) return true
    await sql.unsafe(['BEGIN', ...statements, 'COMMIT'].join(';\n'))
    return true
  } catch {
    return false
  } finally {
    await sql.end().catch(() => undefined)
  }
}

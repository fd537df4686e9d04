import postgres from 'postgres'

/** Test databases and schemas on PostgreSQL (TEST_DATABASE_URL); test/helpers.ts re-exports them. */
export const PG_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'

/** PG_URL with another database name (or host, or port), user and query string kept. */
export function pgUrlWith(
  change: { database?: string; host?: string; port?: number },
  base = PG_URL,
): string {
  const u = new URL(base)
  if (change.host) u.hostname = change.host
  if (change.database) u.pathname = `/${change.database}`
  if (change.port) u.port = String(change.port)
  return u.toString()
}

/**
 * A PostgreSQL database of its own, uniquely named (`prefix_<random>`), on the server of PG_URL:
 * other engineers and CI jobs run the same tests on the same server at the same time, so a test
 * never reuses (or drops) a fixed name. `drop()` removes it (WITH FORCE: only this run knows it).
 */
export async function scratchDatabase(
  prefix: string,
): Promise<{ name: string; url: string; drop: () => Promise<void> }> {
  const name = `${prefix}_${crypto.randomUUID().replace(/-/g, '').slice(0, 12)}`
  const sql = postgres(PG_URL, { max: 1, onnotice: () => undefined })
  try {
    await sql.unsafe(`CREATE DATABASE ${name}`)
  } finally {
    await sql.end()
  }
  return {
    name,
    url: pgUrlWith({ database: name }),
    drop: async () => {
      const s = postgres(PG_URL, { max: 1, onnotice: () => undefined })
      try {
        await s.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      } finally {
        await s.end()
      }
    },
  }
}

export async function pgReachable(): Promise<boolean> {
  const sql = postgres(PG_URL, { max: 1, connect_timeout: 2, onnotice: () => undefined })
  try {
    await sql`SELECT 1`
    return true
  } catch {
    return false
  } finally {
    await sql.end({ timeout: 1 })
  }
}

/** Opens a fresh PostgreSQL schema for one app; dropped again by `stop()`. */
export async function freshSchema(url = PG_URL): Promise<{ schema: string; drop: () => Promise<void> }> {
  const schema = `t_${crypto.randomUUID().replace(/-/g, '').slice(0, 16)}`
  const sql = postgres(url, { max: 1, onnotice: () => undefined })
  await sql.unsafe(`CREATE SCHEMA ${schema}`)
  await sql.end()
  return {
    schema,
    drop: async () => {
      const s = postgres(url, { max: 1, onnotice: () => undefined })
      await s.unsafe(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
      await s.end()
    },
  }
}

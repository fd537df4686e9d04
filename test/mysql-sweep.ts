import mysql from 'mysql2/promise'

/**
 * Who owns the test databases on a shared MySQL/MariaDB server, and the removal of those nobody
 * owns any more. Other engineers' runs and CI use the same server at the same time, so nothing is
 * dropped by name or age alone:
 *
 * - each process holds a named lock (`lo_<owner>`) on a connection of its own for as long as it
 *   lives; its databases are named `t_<owner>_<random>`. The server frees the lock when the
 *   process ends, however it ends, so a database whose owner's lock is free is left over.
 * - a template (`lt_<hash>`, test/mysql-db.ts) is recorded in `lt_registry` each
 *   time an app's database is made from it; one of another hash that no app used for
 *   TEMPLATE_IDLE_MS is dropped, under its build lock (a builder holding it is left alone) and
 *   after reading its last use again under that lock.
 * - databases named before this (`t_<16 hex>`, no owner) and unrecorded templates go when their
 *   newest table is older than LEGACY_MS (no run lasts that long); such a database without
 *   tables stays (it may be one being made this moment).
 *
 * The sweep runs once per process, at its first template, by one process at a time.
 */
const TEMPLATE_IDLE_MS = 20 * 60_000
const LEGACY_MS = 3 * 3_600_000

export const REGISTRY = 'lt_registry'

function connect(url: string): Promise<mysql.Connection> {
  return mysql.createConnection({ uri: url, multipleStatements: true })
}

let owner: Promise<string> | undefined

/** This process's owner id, its lock taken on first use (the connection never keeps the process up). */
export function ownerId(url: string): Promise<string> {
  owner ??= (async () => {
    const id = crypto.randomUUID().replace(/-/g, '').slice(0, 12)
    const c = await connect(url)
    await c.query('SELECT GET_LOCK(?, 0)', [`lo_${id}`])
    ;(c as unknown as { connection: { stream?: { unref?: () => void } } }).connection.stream?.unref?.()
    return id
  })()
  return owner
}

type Drop = (url: string, name: string) => Promise<void>

let swept: Promise<void> | undefined

/** Drops what no live run owns (see above), keeping `current`; once per process, never throws. */
export function sweepOnce(url: string, current: string, drop: Drop): Promise<void> {
  swept ??= sweep(url, current, drop).catch(() => undefined)
  return swept
}

async function sweep(url: string, current: string, drop: Drop): Promise<void> {
  const c = await connect(url)
  try {
    const [[got]] = (await c.query("SELECT GET_LOCK('liveops_test_sweep', 0) AS got")) as unknown as [
      [{ got: number }],
    ]
    if (Number(got?.got) !== 1) return
    await c.query(
      `CREATE TABLE IF NOT EXISTS ${REGISTRY} (name VARCHAR(64) PRIMARY KEY, last_used BIGINT NOT NULL)`,
    )
    const [rows] = (await c.query(
      `SELECT s.schema_name AS s, TIMESTAMPDIFF(SECOND, MAX(t.create_time), NOW()) AS age, r.last_used AS used,
              CASE WHEN s.schema_name REGEXP '^t_[0-9a-f]{12}_' THEN IS_FREE_LOCK(CONCAT('lo_', SUBSTRING(s.schema_name, 3, 12))) END AS orphan
         FROM information_schema.schemata s
         LEFT JOIN information_schema.tables t ON t.table_schema = s.schema_name
         LEFT JOIN ${REGISTRY} r ON r.name = s.schema_name
        WHERE s.schema_name REGEXP '^(t_[0-9a-f]{16}|t_[0-9a-f]{12}_[0-9a-f]+|lt_[0-9a-f]{24})$'
        GROUP BY s.schema_name, r.last_used`,
    )) as unknown as [Array<{ s: string; age: number | null; used: number | null; orphan: number | null }>]
    const now = Date.now()
    // Seconds since its newest table was made (the server's clock for both).
    const old = (age: number | null) => age !== null && Number(age) * 1000 > LEGACY_MS
    for (const r of rows) {
      if (r.s === current) continue
      if (r.s.startsWith('t_')) {
        if (Number(r.orphan) === 1 || (r.orphan === null && old(r.age))) await drop(url, r.s)
        continue
      }
      const [[lock]] = (await c.query('SELECT GET_LOCK(?, 0) AS got', [r.s])) as unknown as [
        [{ got: number }],
      ]
      if (Number(lock?.got) !== 1) continue
      try {
        const [[again]] = (await c.query(`SELECT MAX(last_used) AS used FROM ${REGISTRY} WHERE name = ?`, [
          r.s,
        ])) as unknown as [[{ used: number | null }]]
        const used = again?.used == null ? null : Number(again.used)
        if (used === null ? r.age === null || old(r.age) : now - used > TEMPLATE_IDLE_MS) {
          await drop(url, r.s)
          await c.query(`DELETE FROM ${REGISTRY} WHERE name = ?`, [r.s])
        }
      } finally {
        await c.query('DO RELEASE_LOCK(?)', [r.s])
      }
    }
  } finally {
    await c.query('DO RELEASE_ALL_LOCKS()').catch(() => undefined)
    await c.end()
  }
}

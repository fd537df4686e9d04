import type { Db, Param, Row } from '../../../core/db'
import { inPartOrder } from '../../../core/ordered'
import type { TimelinePage, TimelineQuery, TimelineText } from '../types'
import type { WalkThreads } from './walk-threads'

/**
 * The lightest reads of raw events, for sequence analyses (funnels, paths): each event's user,
 * name and time, page by page in id order (`IngestService.timeline` and `timelineText`).
 */

/** See `IngestService.timeline`. */
export async function walkTimeline(
  db: Db,
  q: TimelineQuery,
  each: (page: TimelinePage) => void,
): Promise<void> {
  const { page, params, limit } = timelinePages(q)
  if (db.dialect === 'postgres')
    return pgTimeline(db, { sql: page, params, limit, since: q.from }, q.afterId, q.toId, (p) =>
      each('rows' in p ? splitText(p) : p),
    )
  for (let after = q.afterId; ; ) {
    const rows = await db.all<{ id: number; user_id: string; event: string; ts: number }>(
      page,
      params(after, q.toId),
    )
    const out: TimelinePage = {
      userId: new Array(rows.length),
      event: new Array(rows.length),
      ts: new Array(rows.length),
    }
    for (let i = 0; i < rows.length; i++) {
      out.userId[i] = rows[i].user_id
      out.event[i] = rows[i].event
      out.ts[i] = rows[i].ts
    }
    if (rows.length) each(out)
    if (rows.length < limit) return
    after = rows[rows.length - 1].id
    // SQLite reads run on the event loop: let requests (ingestion) in between pages.
    await new Promise((r) => setImmediate(r))
  }
}

/**
 * See `IngestService.timelineText`: PostgreSQL's pages as their joined text, SQLite's likewise
 * (`sqliteWalk`), read on `threads` when given (see `WalkThreads`), else on the event loop.
 */
export async function walkTimelineText(
  db: Db,
  q: TimelineQuery,
  each: (page: TimelineText | TimelinePage) => void,
  threads?: WalkThreads,
): Promise<void> {
  if (db.dialect === 'mysql')
    return sqliteWalk((sql, params) => db.all(sql, params), q, each, undefined, MYSQL_JOIN)
  if (db.dialect !== 'postgres') {
    const here = (part: TimelineQuery, each: (page: TimelineText | TimelinePage) => void) =>
      sqliteWalk(
        (sql, params) => db.all(sql, params),
        part,
        each,
        // SQLite reads run on the event loop: let requests (ingestion) in between pages.
        () => new Promise((r) => setImmediate(r)),
      )
    return threads ? threads.walk(q, each, here) : here(q, each)
  }
  const { page, params, limit } = timelinePages(q)
  return pgTimeline(db, { sql: page, params, limit, since: q.from }, q.afterId, q.toId, each)
}

const SQLITE_JOIN = (
  page: string,
) => `SELECT count(*) AS n, max(id) AS last, CAST(group_concat(user_id, char(1)) AS BLOB) AS users,
       CAST(group_concat(event, char(1)) AS BLOB) AS events, CAST(group_concat(ts - ?, ',') AS BLOB) AS ts
     FROM (${page}) HAVING count(*) > 0`
/** MySQL's joins name their order and separator (its sessions allow 64 MB a join: mysql.ts). */
const MYSQL_JOIN = (page: string) => `SELECT COUNT(*) AS n, MAX(id) AS last,
       CAST(GROUP_CONCAT(user_id ORDER BY id SEPARATOR '\u0001') AS BINARY) AS users,
       CAST(GROUP_CONCAT(event ORDER BY id SEPARATOR '\u0001') AS BINARY) AS events,
       CAST(GROUP_CONCAT(ts - ? ORDER BY id SEPARATOR ',') AS BINARY) AS ts
     FROM (${page}) AS page HAVING COUNT(*) > 0`

/**
 * The SQLite walk of `q` (ids `(afterId, toId]`) as joined pages, `each` given each page and its
 * last id. A page is one row, as on PostgreSQL (`pgPart`): its users and names joined by U+0001
 * and its times (their distance from the range's start) by commas, by `group_concat` over the
 * page's rows in id order, as bytes (a BLOB); JS takes three values a page instead of four per
 * row, and `TextTimelineBuilder` parses them in place. A page whose users or names hold U+0001
 * is read again as columns. `all` runs a statement (the event loop's connection or a thread's
 * own); `pause` runs between pages.
 *
 * The joins follow the subquery's id order: SQLite's aggregate reads the subquery's rows as it
 * yields them, and each join the same rows. `group_concat(... ORDER BY id)` (SQLite 3.44) would
 * promise it, at more than twice the cost of the page (a sort per join: 700-730 ms for the
 * day's pages against 295-305, the same bytes); the tests compare the pages with the columns.
 */
export async function sqliteWalk(
  all: (sql: string, params: Param[]) => Promise<Row[]> | Row[],
  q: TimelineQuery,
  each: (page: TimelineText | TimelinePage, last: number) => void,
  pause?: () => Promise<unknown>,
  join: (page: string) => string = SQLITE_JOIN,
): Promise<void> {
  const { page, params, limit } = timelinePages(q)
  const joined = join(page)
  for (let after = q.afterId; ; ) {
    const [row] = (await all(joined, [q.from, ...params(after, q.toId)])) as Array<{
      n: number
      last: number
      users: Uint8Array
      events: Uint8Array
      ts: Uint8Array
    }>
    if (!row) return
    const n = Number(row.n)
    const last = Number(row.last)
    if (ones(row.users) === n - 1 && ones(row.events) === n - 1)
      each({ rows: n, users: row.users, events: row.events, since: q.from, ts: row.ts }, last)
    else {
      // A user or name holds U+0001: this page again, as columns.
      const rows = (await all(page, params(after, q.toId))) as Array<{
        user_id: string
        event: string
        ts: number
      }>
      each(
        {
          userId: rows.map((r) => r.user_id),
          event: rows.map((r) => r.event),
          ts: rows.map((r) => Number(r.ts)),
        },
        last,
      )
    }
    if (n < limit) return
    after = last
    await pause?.()
  }
}

/** A joined page as columns. */
function splitText(p: TimelineText): TimelinePage {
  const text = new TextDecoder()
  const ts: number[] = JSON.parse(`[${text.decode(p.ts)}]`)
  for (let i = 0; i < ts.length; i++) ts[i] += p.since
  return { userId: text.decode(p.users).split('\u0001'), event: text.decode(p.events).split('\u0001'), ts }
}

/** The walk's page query (ids in `(?, ?]`) and its parameters. */
function timelinePages(q: TimelineQuery) {
  const limit = Math.max(1, Math.min(10_000, Math.floor(q.limit)))
  const names = q.events?.length ? ` AND event IN (${q.events.map(() => '?').join(', ')})` : ''
  const page = `SELECT id, user_id, event, ts FROM ingest_events
     WHERE game_id = ? AND env = ? AND id > ? AND id <= ? AND ts >= ? AND ts < ? AND user_id IS NOT NULL${names}
     ORDER BY id LIMIT ?`
  const params = (afterId: number, toId: number): Param[] => [
    q.gameId,
    q.env,
    afterId,
    toId,
    q.from,
    q.to,
    ...(q.events ?? []),
    limit,
  ]
  return { page, params, limit }
}

interface PgPages {
  sql: string
  /** The range's start: times are sent as their distance from it (shorter texts to build and parse). */
  since: number
  params: (afterId: number, toId: number) => Param[]
  limit: number
}

/**
 * The walk on PostgreSQL: the id range in `PG_PARTS` parts, each walked on its own connection at
 * the same time, so the server reads on both cores and always has a page to build while the
 * caller works through others (a walk waited on the server for most of its time: reading a page
 * costs it more than the caller's work on it; with two parts each connection still sat idle
 * between a page's arrival and the caller's request of the next). A part's pages are held until
 * the parts before it are handed over, so `each` still sees id order.
 */
async function pgTimeline(
  db: Db,
  pages: PgPages,
  afterId: number,
  toId: number,
  each: (page: TimelineText | TimelinePage) => void,
): Promise<void> {
  const cut = (i: number) => (i === PG_PARTS ? toId : afterId + Math.floor(((toId - afterId) / PG_PARTS) * i))
  const parts = Array.from(
    { length: PG_PARTS },
    (_, i) => (emit: (page: TimelineText | TimelinePage) => void) =>
      pgPart(db, pages, cut(i), cut(i + 1), emit),
  )
  await inPartOrder(parts, each)
}

/**
 * Connections a PostgreSQL walk reads on at once. Two, four and six alternated on the 10 M
 * store (24 hours, 333,333 rows): the walk took 316-336 ms with two, 271-295 with four, 283-295
 * with six.
 */
const PG_PARTS = 4

/**
 * One part: in one transaction (one snapshot), each page asked for as soon as the one before it
 * arrived, so the server reads it while the caller works through that one.
 *
 * A page comes as one row holding each column joined into one text, so the driver parses one
 * row instead of ten thousand (building an object of four parsed fields per row cost more than
 * the funnel itself), handed over as the bytes that came (`TimelineText`; times as their distance
 * from the range's start, shorter texts for the server to build). Users and names are joined by
 * U+0001, which they may hold (only NUL is kept out of stored text): a page whose texts hold more
 * of it than its separators is read again as JSON arrays (escaped, so exact; the server builds
 * them about three times slower) and handed over as columns.
 * The joins follow the subquery's id order: a plain aggregate reads its input in order, and each
 * of them reads the same rows.
 *
 * The plan is fixed, not left to statistics: with the table's statistics missing or stale after
 * a bulk load, the planner chose a bitmap scan of the whole id range and a sort for every page
 * (2.6 s for a day instead of 0.5), so the pages run with only the primary key's index scan
 * allowed, which reads just the page's rows, in id order; and without JIT, which the planner's
 * cost guess for that scan switched on, costing more (9 ms) than the page's query (5 ms).
 */
function pgPart(
  db: Db,
  pages: PgPages,
  afterId: number,
  toId: number,
  each: (page: TimelineText | TimelinePage) => void,
): Promise<void> {
  type Joined = { n: number; last: number; users: string; events: string; ts: string }
  type Raw = { n: number; last: number; odd: boolean; users: Uint8Array; events: Uint8Array; ts: Uint8Array }
  return db.tx(async (tx) => {
    await tx.exec(
      'SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL jit = off',
    )
    const json = (after: number) =>
      tx.get<Joined>(
        `SELECT count(*) AS n, max(id) AS last, json_agg(user_id)::text AS users,
           json_agg(event)::text AS events, json_agg(ts)::text AS ts
         FROM (${pages.sql}) page HAVING count(*) > 0`,
        pages.params(after, toId),
      )
    const sql = `SELECT count(*) AS n, max(id) AS last, string_agg(user_id, chr(1)) AS users,
         string_agg(event, chr(1)) AS events, string_agg((ts - ?)::text, ',') AS ts
       FROM (${pages.sql}) page HAVING count(*) > 0`
    // The texts as the bytes that came (see `Db.raw`); encoded again where the store has no raw read.
    const utf8 = new TextEncoder()
    const joined = async (after: number): Promise<Raw | undefined> => {
      const params = [pages.since, ...pages.params(after, toId)]
      let page: Omit<Raw, 'odd'>
      if (tx.raw) {
        const [row] = await tx.raw(sql, params)
        if (!row) return undefined
        const [n, last, users, events, ts] = row as Uint8Array[]
        const num = (b: Uint8Array) => Number(Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString())
        page = { n: num(n), last: num(last), users, events, ts }
      } else {
        const row = await tx.get<Joined>(sql, params)
        if (!row) return undefined
        page = {
          ...row,
          users: utf8.encode(row.users),
          events: utf8.encode(row.events),
          ts: utf8.encode(row.ts),
        }
      }
      // Byte 1 is U+0001 in UTF-8 (never part of another character): a page is odd when its
      // users or names hold more of them than the n - 1 separators. Counted here, not by the
      // server (a test of each row, or a replace of the joined texts, cost it 25-30% more).
      return { ...page, odd: ones(page.users) !== page.n - 1 || ones(page.events) !== page.n - 1 }
    }
    let after = afterId
    let next: Promise<Raw | undefined> | undefined = joined(after)
    try {
      while (next) {
        const row: Raw | undefined = await next
        if (!row) return
        next = row.n === pages.limit ? joined(row.last) : undefined
        if (!row.odd)
          each({ rows: row.n, users: row.users, events: row.events, since: pages.since, ts: row.ts })
        else {
          // A user or name holds U+0001: this page again, each column a JSON array.
          const page = await json(after)
          if (page)
            each({ userId: JSON.parse(page.users), event: JSON.parse(page.events), ts: JSON.parse(page.ts) })
        }
        after = row.last
      }
    } catch (e) {
      // The page asked for ahead is not waited for: its failure is this one's.
      next?.catch(() => undefined)
      throw e
    }
  })
}

/** How many bytes of `b` are 1. */
function ones(b: Uint8Array): number {
  let n = 0
  for (let i = 0; i < b.length; i++) if (b[i] === 1) n++
  return n
}

import { afterAll, beforeAll } from 'bun:test'
import { type Db, type MigrationSet, migrate } from '../../core/db'
import type { LogEntry } from '../../core/event-log-types'
import { signRequest } from '../../sdk/sign'
import { type Engine, type TestApp, makeApp, rawDb, until } from '../../test/helpers'
import { ingestMigrations } from './migrations'
import type { CommitRows } from './persist/persist'

/** Shared by the ingestion test files. */
export const SECRET = 'test-signing-secret'
export const game = {
  name: 'Ingest Quest',
  genre: 'RPG',
  platforms: ['ANDROID'],
  timezone: 'UTC',
  defaultCurrency: 'USD',
}

/**
 * An app with games, ingest (signed with `SECRET`, no purge), analytics and any `more` plugins, its
 * admin's token, and a new `game`.
 */
export async function ingestApp(
  engine: Engine,
  more: Record<string, unknown> = {},
): Promise<{ a: TestApp; admin: string; gameId: string }> {
  const a = await makeApp(engine, {
    plugins: {
      games: {},
      ingest: { signing_secret: SECRET, purge_interval_minutes: 0 },
      analytics: {},
      ...more,
    },
  })
  const admin = await a.token('admin')
  const g = await a.req('POST', '/api/games', { token: admin, body: game })
  if (g.status !== 201) throw new Error(`creating the test game answered ${g.status}`)
  return { a, admin, gameId: g.body.id }
}
export const DAY = 86_400_000

/** The reason of an event time outside the ingest plugin's window (`eventWindow`, signed/validate.ts). */
export const OUTSIDE_WINDOW =
  /must be epoch milliseconds from \S+Z to \S+Z \(at most max_event_age_days \d+ days old and max_event_future_s \d+ s ahead of the server's clock\)$/

/** A request signed the way the SDK signs it. */
export async function signed(
  a: TestApp,
  path: string,
  payload: unknown,
  o: { secret?: string; headers?: Record<string, string>; timestamp?: number; nonce?: string } = {},
) {
  const body = typeof payload === 'string' ? payload : JSON.stringify(payload)
  const sig = await signRequest(o.secret ?? SECRET, body, { timestamp: o.timestamp, nonce: o.nonce })
  return a.req('POST', path, {
    raw: body,
    headers: { 'content-type': 'application/json', ...sig, ...o.headers },
  })
}

/** A commit with no rows: one stream (`g`, `prod`), ids from 1, received at `receivedAt`. */
export const emptyCommit = (receivedAt = 1000): CommitRows => ({
  events: { firstId: 1, receivedAt, streams: ['g', 'prod'], cols: [], props: [] },
  payments: [],
  invocations: [],
})

/**
 * A fresh store with the ingest tables (and `more`, such as a rollup owner's), for the test
 * file's suite on `engine`: `store.db` once it began.
 */
export function migratedStore(engine: Engine, more: MigrationSet[] = []): { db: Db } {
  const store = {} as { db: Db }
  let done = async () => {}
  beforeAll(async () => {
    const raw = await rawDb(engine)
    store.db = raw.db
    done = raw.done
    await migrate(raw.db, [{ plugin: 'ingest', migrations: ingestMigrations }, ...more])
  })
  afterAll(() => done())
  return store
}

/** Every field a consumer can read of a log row (the hand-over and kept-rows tests compare them). */
export const logFields = (e: LogEntry) => {
  const r = e.row
  return {
    at: e.at,
    id: r.id,
    receivedAt: r.receivedAt,
    gameId: r.gameId,
    env: r.env,
    event: r.event,
    ts: r.ts,
    userId: r.userId,
    sessionId: r.sessionId,
    amountCents: r.amountCents,
    currency: r.currency,
    durationMs: r.durationMs,
    network: r.network,
    level: r.level,
    eventId: r.eventId,
    payment: r.payment,
    invocation: r.invocation,
    props: r.props,
  }
}

/**
 * Waits until every deleted game or environment is forgotten: a deletion answers once recorded
 * and deletes its rows (and tells the consumers to read again) in the background.
 */
export const forgotten = (app: TestApp) =>
  until(
    async () =>
      Number((await app.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM ingest_forgetting'))?.n) === 0,
    { what: 'deleted streams forgotten' },
  )

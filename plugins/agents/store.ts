import { randomBytes } from 'node:crypto'
import { VerifiedCache } from '../../core/auth/verified'
import { type Db, fromJson, iso } from '../../core/db'
import { atCap } from '../../core/db/room'
import { Conflict, NotFound } from '../../core/http'
import { turn } from '../../core/turn'
import { type Agent, type AgentQuery, FunctionId, type Heartbeat, QPS_MAX, type Register } from './schema'

interface Row {
  id: string
  name: string
  game_id: string
  env: string
  region: string | null
  zone: string | null
  version: string | null
  functions: string
  qps: number | string
  qps_1m: number | string
  jobs_executed: number | string
  jobs_failed: number | string
  registered_at: number | string
  last_heartbeat_at: number | string
}
type FleetRow = Pick<
  Row,
  'id' | 'game_id' | 'env' | 'jobs_executed' | 'registered_at' | 'last_heartbeat_at'
> & {
  function_count: number | string
}
const COLS =
  'id, name, game_id, env, region, zone, version, functions, qps, qps_1m, jobs_executed, jobs_failed, registered_at, last_heartbeat_at'

/** What an agent key is checked against (auth.ts): the registration's game and random value. */
export interface Registration {
  game_id: string | null
  /** NULL for a row registered before keys were bound to registrations (its key is the id's alone). */
  key_nonce: string | null
}

/** What a scrape reads of an agent: its series' labels and values, not its functions. */
export interface FleetAgent {
  agent_id: string
  game_id: string
  env: string
  status: 'online' | 'offline'
  function_count: number
  jobs_executed: number
  registered_at: number
}

/** Agents a page of the list holds when the query names no limit, and at most. */
export const AGENTS_PAGE_MAX = 500
/** Agents whose functions one step of the distinct count parses before the event loop's next turn. */
const DISTINCT_STEP = 100
const FUNCTION_ID = new RegExp(FunctionId.pattern as string)
/** A revision of the agents' functions moves with every change of them (migration 004). */
const BUMP = 'UPDATE agents_revision SET rev = rev + 1 WHERE id = 1'

/** One minute, the window of qps_1m. */
const WINDOW_S = 60

/**
 * The 1-minute rate as the load average computes it: the previous value moves toward the newly
 * reported qps by how much of a minute passed since, so no samples need keeping.
 */
export function smooth(prev: number, qps: number, elapsedS: number): number {
  const rate = (v: number) => (Number.isFinite(v) ? Math.min(Math.max(v, 0), QPS_MAX) : 0)
  const now = rate(qps)
  // A stored mean out of range (one written before qps was bounded, even Infinity) restarts at the
  // report instead of poisoning every later heartbeat: a non-finite mean fails the answer's schema.
  const from = Number.isFinite(prev) && prev >= 0 && prev <= QPS_MAX ? prev : now
  const keep = Math.exp(-(elapsedS > 0 ? elapsedS : 0) / WINDOW_S)
  return Math.round((from * keep + now * (1 - keep)) * 1000) / 1000
}

/** Agents registered at once, unless `plugins.agents.max_agents` says otherwise. */
export const MAX_AGENTS = 10_000

export function agentsStore(
  db: Db,
  offlineAfterS: () => number,
  opts: { now?: () => number; changed?: () => void; maxAgents?: () => number } = {},
) {
  const now = opts.now ?? Date.now
  // Agent keys are checked on every heartbeat: the registrations they were checked against are
  // kept, unknown ids too, until a registration or deletion here or on another instance.
  const registrations = new VerifiedCache<Registration>()
  const keysChanged = () => {
    registrations.forget()
    opts.changed?.()
  }
  const online = (last: number, t: number) => t - last < offlineAfterS() * 1000
  const toAgent = (r: Row, t = now()): Agent => {
    const last = Number(r.last_heartbeat_at)
    return {
      agent_id: r.id,
      name: r.name,
      game_id: r.game_id,
      env: r.env,
      region: r.region ?? undefined,
      zone: r.zone ?? undefined,
      version: r.version ?? undefined,
      functions: fromJson<string[]>(r.functions, []),
      qps: Number(r.qps),
      qps_1m: Number(r.qps_1m),
      status: online(last, t) ? 'online' : 'offline',
      jobs_executed: Number(r.jobs_executed),
      jobs_failed: Number(r.jobs_failed),
      registered_at: iso(Number(r.registered_at))!,
      last_heartbeat_at: iso(last)!,
    }
  }

  // The stored list is JSON.stringify of ids that hold no quote or comma: an id is served exactly
  // when the list holds it in quotes (one not of the id's pattern is served by none).
  const filter = (q: AgentQuery, t: number) => {
    const where: string[] = []
    const args: (string | number)[] = []
    for (const k of ['game_id', 'env', 'region', 'zone'] as const)
      if (q[k] !== undefined) {
        where.push(`${k} = ?`)
        args.push(q[k])
      }
    if (q.status) {
      where.push(`last_heartbeat_at ${q.status === 'online' ? '>' : '<='} ?`)
      args.push(t - offlineAfterS() * 1000)
    }
    if (q.function_id !== undefined) {
      if (!FUNCTION_ID.test(q.function_id)) where.push('1 = 0')
      else {
        // Case-sensitive on every engine (SQLite's LIKE is not): strpos, and instr (MySQL's on a binary collation).
        where.push(`${db.dialect === 'postgres' ? 'strpos' : 'instr'}(functions, ?) > 0`)
        args.push(JSON.stringify(q.function_id))
      }
    }
    return { where, args }
  }
  let distinct: { rev: string; count: number } | undefined
  let counting: Promise<number> | undefined

  const get = async (id: string): Promise<Agent> => {
    const r = await db.get<Row>(`SELECT ${COLS} FROM agents WHERE id = ?`, [id])
    if (!r) throw new NotFound(`agent '${id}' is not registered`)
    return toAgent(r)
  }

  return {
    get,

    /** The registration an agent key of `id` is checked against; undefined when not registered. */
    registration(id: string): Promise<Registration | undefined> {
      return registrations.verify(id, async () => {
        const r = await db.get<Registration>('SELECT game_id, key_nonce FROM agents WHERE id = ?', [id])
        return r ? { game_id: r.game_id ?? null, key_nonce: r.key_nonce ?? null } : null
      })
    },

    /** Drops the registrations kept for key checks (another instance registered or deleted an agent). */
    forgetKeys(): void {
      registrations.forget()
    },

    /**
     * Registers or re-registers (same agent_id): labels and functions are replaced, counters stay;
     * the game cannot change (409).
     */
    async register(b: Register): Promise<{ agent: Agent; created: boolean; registration: Registration }> {
      const t = now()
      const qps = b.qps ?? 0
      const created = await db.tx(async (tx) => {
        const had = await tx.get<{ id: string; game_id: string | null }>(
          'SELECT id, game_id FROM agents WHERE id = ?',
          [b.agent_id],
        )
        // The shared agent token is held by every agent: a name must not let one take over another game's agent.
        if (had?.game_id && had.game_id !== b.game_id)
          throw new Conflict(
            `agent_id '${b.agent_id}' is registered under another game; an agent keeps the game it registered with (unregister it, or use another agent_id)`,
          )
        // Every preview reads them all (metrics, the agent list a page): a new agent past the cap is
        // refused (the shared token had registered 1,000 agents of 1,000 functions in a minute).
        const max = opts.maxAgents?.() ?? MAX_AGENTS
        if (!had && (await atCap(tx, { pg: 72_410_010, mysql: 'liveops_agents', waitS: 10 }, 'agents', max)))
          throw new Conflict(
            `at most ${max} agents are registered: delete one first (plugins.agents.max_agents)`,
          )
        // The key's random value is kept while the agent registers again under its game (its
        // running replicas keep their key) and filled in for a row from before it existed; a new
        // row or a new game gets a new one. It is set first: MySQL applies the SETs in order, so
        // agents.game_id is still the old game here on every engine.
        await tx.run(
          `INSERT INTO agents (id, name, game_id, env, region, zone, version, functions, function_count, qps, qps_1m, registered_at, last_heartbeat_at, key_nonce)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (id) DO UPDATE SET
             key_nonce = CASE WHEN agents.game_id = excluded.game_id THEN COALESCE(agents.key_nonce, excluded.key_nonce) ELSE excluded.key_nonce END,
             name = excluded.name, game_id = excluded.game_id, env = excluded.env,
             region = excluded.region, zone = excluded.zone, version = excluded.version,
             functions = excluded.functions, function_count = excluded.function_count,
             qps = excluded.qps, last_heartbeat_at = excluded.last_heartbeat_at`,
          [
            b.agent_id,
            b.name ?? b.agent_id,
            b.game_id,
            b.env,
            b.region ?? null,
            b.zone ?? null,
            b.version ?? null,
            JSON.stringify(b.functions),
            b.functions.length,
            qps,
            qps,
            t,
            t,
            randomBytes(18).toString('base64url'),
          ],
        )
        await tx.run(BUMP)
        return !had
      })
      keysChanged()
      const agent = await get(b.agent_id)
      const reg = await db.get<Registration>('SELECT game_id, key_nonce FROM agents WHERE id = ?', [
        b.agent_id,
      ])
      return {
        agent,
        created,
        registration: { game_id: reg?.game_id ?? null, key_nonce: reg?.key_nonce ?? null },
      }
    },

    /** The agent as this heartbeat left it (the row it read and what it wrote: one read). */
    async heartbeat(id: string, b: Heartbeat): Promise<Agent> {
      const t = now()
      const row = await db.tx(async (tx) => {
        const r = await tx.get<Row>(`SELECT ${COLS} FROM agents WHERE id = ?`, [id])
        if (!r) throw new NotFound(`agent '${id}' is not registered; register again`)
        const qps = b.qps ?? Number(r.qps)
        const qps1m = b.qps_1m ?? smooth(Number(r.qps_1m), qps, (t - Number(r.last_heartbeat_at)) / 1000)
        const functions = b.functions ? JSON.stringify(b.functions) : r.functions
        await tx.run(
          `UPDATE agents SET qps = ?, qps_1m = ?, last_heartbeat_at = ?${b.functions ? ', functions = ?, function_count = ?' : ''} WHERE id = ?`,
          b.functions ? [qps, qps1m, t, functions, b.functions.length, id] : [qps, qps1m, t, id],
        )
        if (functions !== r.functions) await tx.run(BUMP)
        return { ...r, qps, qps_1m: qps1m, last_heartbeat_at: t, functions }
      })
      return toAgent(row)
    },

    async countJobs(id: string, executed: number, failed: number): Promise<void> {
      const n = await db.run(
        'UPDATE agents SET jobs_executed = jobs_executed + ?, jobs_failed = jobs_failed + ? WHERE id = ?',
        [executed, failed, id],
      )
      if (!n) throw new NotFound(`agent '${id}' is not registered`)
    },

    /**
     * The agents the query's labels, status and function select, by agent_id: all of them, or
     * `limit` after the agent_id `after`. Filtered by the store, so only the agents answered are parsed.
     */
    async list(q: AgentQuery & { limit?: number; after?: string } = {}): Promise<Agent[]> {
      const t = now()
      const { where, args } = filter(q, t)
      if (q.after !== undefined) {
        where.push('id > ?')
        args.push(q.after)
      }
      const rows = await db.all<Row>(
        `SELECT ${COLS} FROM agents${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY id${q.limit === undefined ? '' : ` LIMIT ${Math.max(0, Math.floor(q.limit))}`}`,
        args,
      )
      return rows.map((r) => toAgent(r, t))
    },

    /** How many agents the query's labels, status and function select (all pages). */
    async count(q: AgentQuery = {}): Promise<number> {
      const { where, args } = filter(q, now())
      const r = await db.get<{ n: number | string }>(
        `SELECT COUNT(*) AS n FROM agents${where.length ? ` WHERE ${where.join(' AND ')}` : ''}`,
        args,
      )
      return Number(r?.n ?? 0)
    },

    async remove(id: string): Promise<void> {
      await db.tx(async (tx) => {
        if (!(await tx.run('DELETE FROM agents WHERE id = ?', [id])))
          throw new NotFound(`agent '${id}' is not registered`)
        await tx.run(BUMP)
      })
      keysChanged()
    },

    /** Every agent as a scrape reads it: labels, counts and status, never the functions themselves. */
    async fleet(): Promise<FleetAgent[]> {
      const rows = await db.all<FleetRow>(
        'SELECT id, game_id, env, function_count, jobs_executed, registered_at, last_heartbeat_at FROM agents ORDER BY id',
      )
      const t = now()
      return rows.map((r) => ({
        agent_id: r.id,
        game_id: r.game_id,
        env: r.env,
        status: online(Number(r.last_heartbeat_at), t) ? 'online' : 'offline',
        function_count: Number(r.function_count),
        jobs_executed: Number(r.jobs_executed),
        registered_at: Number(r.registered_at),
      }))
    },

    /**
     * Distinct function ids over all agents. Computed once per revision of the agents' functions
     * (every instance reads the revision from the store) and then kept; the lists are read a few
     * hundred agents at a time with a turn of the event loop between, so no request waits for all.
     */
    distinctFunctions(): Promise<number> {
      const run = async () => {
        const rev = String(
          (await db.get<{ rev: number | string }>('SELECT rev FROM agents_revision WHERE id = 1'))?.rev,
        )
        if (distinct?.rev === rev) return distinct.count
        const seen = new Set<string>()
        let after = ''
        for (;;) {
          const rows = await db.all<{ id: string; functions: string }>(
            'SELECT id, functions FROM agents WHERE id > ? ORDER BY id LIMIT ?',
            [after, DISTINCT_STEP],
          )
          for (const r of rows) for (const f of fromJson<string[]>(r.functions, [])) seen.add(f)
          if (rows.length < DISTINCT_STEP) break
          after = rows[rows.length - 1].id
          await turn()
        }
        // Read before the lists: a change while they were read moved it, and the next read counts again.
        distinct = { rev, count: seen.size }
        return seen.size
      }
      // Scrapes at once share one count.
      counting ??= run().finally(() => {
        counting = undefined
      })
      return counting
    },
  }
}
export type AgentsStore = ReturnType<typeof agentsStore>

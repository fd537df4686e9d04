import { randomBytes } from 'node:crypto'
import { VerifiedCache } from '../../core/auth/verified'
import { type Db, fromJson, iso } from '../../core/db'
import { atCap } from '../../core/db/room'
import { Conflict, NotFound } from '../../core/http'
import { type Agent, type AgentQuery, type Heartbeat, QPS_MAX, type Register } from './schema'

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
const COLS =
  'id, name, game_id, env, region, zone, version, functions, qps, qps_1m, jobs_executed, jobs_failed, registered_at, last_heartbeat_at'

/** What an agent key is checked against (auth.ts): the registration's game and random value. */
export interface Registration {
  game_id: string | null
  /** NULL for a row registered before keys were bound to registrations (its key is the id's alone). */
  key_nonce: string | null
}

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
  const toAgent = (r: Row): Agent => {
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
      status: now() - last < offlineAfterS() * 1000 ? 'online' : 'offline',
      jobs_executed: Number(r.jobs_executed),
      jobs_failed: Number(r.jobs_failed),
      registered_at: iso(Number(r.registered_at))!,
      last_heartbeat_at: iso(last)!,
    }
  }

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
        // Every preview, metrics read and agent list reads them all: a new agent past the cap is
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
          `INSERT INTO agents (id, name, game_id, env, region, zone, version, functions, qps, qps_1m, registered_at, last_heartbeat_at, key_nonce)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (id) DO UPDATE SET
             key_nonce = CASE WHEN agents.game_id = excluded.game_id THEN COALESCE(agents.key_nonce, excluded.key_nonce) ELSE excluded.key_nonce END,
             name = excluded.name, game_id = excluded.game_id, env = excluded.env,
             region = excluded.region, zone = excluded.zone, version = excluded.version, functions = excluded.functions,
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
            qps,
            qps,
            t,
            t,
            randomBytes(18).toString('base64url'),
          ],
        )
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
          `UPDATE agents SET qps = ?, qps_1m = ?, last_heartbeat_at = ?${b.functions ? ', functions = ?' : ''} WHERE id = ?`,
          b.functions ? [qps, qps1m, t, functions, id] : [qps, qps1m, t, id],
        )
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

    async list(q: AgentQuery = {}): Promise<Agent[]> {
      const rows = await db.all<Row>(
        `SELECT ${COLS} FROM agents
         WHERE (CAST(? AS TEXT) IS NULL OR game_id = ?) AND (CAST(? AS TEXT) IS NULL OR env = ?)
           AND (CAST(? AS TEXT) IS NULL OR region = ?) AND (CAST(? AS TEXT) IS NULL OR zone = ?)
         ORDER BY id`,
        [
          q.game_id ?? null,
          q.game_id ?? null,
          q.env ?? null,
          q.env ?? null,
          q.region ?? null,
          q.region ?? null,
          q.zone ?? null,
          q.zone ?? null,
        ],
      )
      return rows
        .map(toAgent)
        .filter(
          (a) =>
            (!q.status || a.status === q.status) && (!q.function_id || a.functions.includes(q.function_id)),
        )
    },

    async remove(id: string): Promise<void> {
      if (!(await db.run('DELETE FROM agents WHERE id = ?', [id])))
        throw new NotFound(`agent '${id}' is not registered`)
      keysChanged()
    },
  }
}
export type AgentsStore = ReturnType<typeof agentsStore>

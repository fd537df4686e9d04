import { type Db, fromJson, iso } from '../../core/db'
import { atCap } from '../../core/db/room'
import { Conflict, NotFound, invalidField } from '../../core/http'

/** Rate-limit sets kept at once (each up to 200 rules). */
export const MAX_SETS = 100
import type { PreviewBody, RateLimitSet, Rule, StoredSet } from './schema'

interface Row {
  id: string
  name: string
  resource: string
  limit_n: number | string
  window_s: number | string
  action: string
  rules: string
  status: string
  created_at: number | string
  updated_at: number | string
}
const COLS = 'id, name, resource, limit_n, window_s, action, rules, status, created_at, updated_at'

const toSet = (r: Row): StoredSet => ({
  rateLimitId: r.id,
  name: r.name,
  resource: r.resource as StoredSet['resource'],
  limit: Number(r.limit_n),
  window: Number(r.window_s),
  action: r.action as StoredSet['action'],
  rules: fromJson<Rule[]>(r.rules, []),
  status: r.status as StoredSet['status'],
  createdAt: iso(Number(r.created_at))!,
  updatedAt: iso(Number(r.updated_at))!,
})

/** What the schema cannot say: one rule per scope and key, so the effective limit is unambiguous. */
export function checkRules(set: Pick<PreviewBody, 'rules'>): void {
  const seen = new Map<string, number>()
  set.rules.forEach((r, i) => {
    const k = `${r.scope}\u0000${r.key}\u0000${JSON.stringify(Object.entries(r.match).sort())}`
    const prev = seen.get(k)
    if (prev !== undefined)
      throw invalidField(`body.rules[${i}].key`, `duplicates rules[${prev}] (same scope, key and match)`)
    seen.set(k, i)
    if (r.scope === 'function' && r.key === '*')
      throw invalidField(`body.rules[${i}].key`, "a function rule names one function id, not '*'")
  })
}

export function rateLimitStore(db: Db) {
  const get = async (id: string): Promise<StoredSet> => {
    const r = await db.get<Row>(`SELECT ${COLS} FROM rate_limits WHERE id = ?`, [id])
    if (!r) throw new NotFound(`rate limit '${id}' not found`)
    return toSet(r)
  }
  return {
    get,
    async list(): Promise<StoredSet[]> {
      return (await db.all<Row>(`SELECT ${COLS} FROM rate_limits ORDER BY id`)).map(toSet)
    },
    /** Stores the whole set (replacing any with its id); answers it and the one it replaced. */
    async put(s: RateLimitSet): Promise<{ set: StoredSet; before?: StoredSet }> {
      checkRules(s)
      const now = Date.now()
      const before = await db.tx(async (tx) => {
        const prev = await tx.get<Row>(`SELECT ${COLS} FROM rate_limits WHERE id = ?`, [s.rateLimitId])
        // Every agent's heartbeat reads them all: a bounded number of sets.
        if (
          !prev &&
          (await atCap(
            tx,
            { pg: 72_410_009, mysql: 'liveops_rate_limits', waitS: 10 },
            'rate_limits',
            MAX_SETS,
          ))
        )
          throw new Conflict(`at most ${MAX_SETS} rate-limit sets: delete one first`)
        await tx.run(
          `INSERT INTO rate_limits (${COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (id) DO UPDATE SET name = excluded.name, resource = excluded.resource, limit_n = excluded.limit_n,
             window_s = excluded.window_s, action = excluded.action, rules = excluded.rules, status = excluded.status,
             updated_at = excluded.updated_at`,
          [
            s.rateLimitId,
            s.name,
            s.resource,
            s.limit,
            s.window,
            s.action,
            JSON.stringify(s.rules),
            s.status ?? 'on',
            now,
            now,
          ],
        )
        return prev ? toSet(prev) : undefined
      })
      return { set: await get(s.rateLimitId), before }
    },
    async remove(id: string): Promise<StoredSet> {
      const prev = await get(id)
      if (!(await db.run('DELETE FROM rate_limits WHERE id = ?', [id])))
        throw new NotFound(`rate limit '${id}' not found`)
      return prev
    },
  }
}
export type RateLimitStore = ReturnType<typeof rateLimitStore>

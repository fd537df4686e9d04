import { createHash } from 'node:crypto'
import type { Agent, EffectiveLimit } from '../agents/schema'
import type { Rule, StoredSet } from './schema'

/** The agent labels a rule's `match` may name. */
export const LABELS = ['game_id', 'env', 'region', 'zone'] as const

/** Whether an agent's labels equal every label the match names. */
export const matches = (match: Rule['match'], a: Agent) =>
  LABELS.every((l) => match[l] === undefined || a[l] === match[l])

/**
 * An agent's rollout bucket for a rule set, 0-99: the first four bytes of
 * SHA-256(`rateLimitId:agent_id`) as an unsigned big-endian integer, mod 100. Stable: the same
 * agent is in or out of a set's rollout on every heartbeat and every instance, and raising a
 * rule's percent only adds agents. Salted by the set, so one agent is not the first 10% of every set.
 */
export function bucket(rateLimitId: string, agentId: string): number {
  return createHash('sha256').update(`${rateLimitId}:${agentId}`).digest().readUInt32BE(0) % 100
}

/** A rule of a set that is on, with its place in the sets' order (the order limits are answered in). */
interface Entry {
  set: StoredSet
  rule: Rule
  order: number
}
/** Rules of one key, by their match (`signature`). */
type ByMatch = Map<string, Entry[]>

/**
 * The rules of the sets that are on, by what can bind them: function rules by the function id
 * they name, service rules by their key (`*`, an agent_id or a name), then by their match. A
 * heartbeat looks up its agent's functions and names, never every rule: 100 sets of 200 function
 * rules had cost each heartbeat 20,000 scans of the agent's 1,000 functions (32 ms of the loop).
 */
export interface RuleIndex {
  fn: Map<string, ByMatch>
  service: Map<string, ByMatch>
}

/** A match's labels as one string: rules and agent label subsets meet on it. */
const signature = (m: Partial<Record<(typeof LABELS)[number], string>>) =>
  JSON.stringify(LABELS.map((l) => m[l] ?? null))

export function indexRules(sets: StoredSet[]): RuleIndex {
  const index: RuleIndex = { fn: new Map(), service: new Map() }
  let order = 0
  for (const set of sets) {
    if (set.status !== 'on') continue
    for (const rule of set.rules) {
      const byKey = rule.scope === 'function' ? index.fn : index.service
      let byMatch = byKey.get(rule.key)
      if (!byMatch) {
        byMatch = new Map()
        byKey.set(rule.key, byMatch)
      }
      const sig = signature(rule.match)
      const list = byMatch.get(sig)
      const entry = { set, rule, order: order++ }
      if (list) list.push(entry)
      else byMatch.set(sig, [entry])
    }
  }
  return index
}

/** The signatures of every match an agent meets: each subset of the labels it has (at most 16). */
function agentSignatures(a: Agent): string[] {
  const have = LABELS.filter((l) => a[l] !== undefined)
  const out: string[] = []
  for (let mask = 0; mask < 1 << have.length; mask++)
    out.push(signature(Object.fromEntries(have.filter((_, i) => mask & (1 << i)).map((l) => [l, a[l]]))))
  return out
}

/**
 * The limits an agent enforces: each rule of an enabled (status on) set that binds the agent (its
 * labels match, its key names the agent or a function it serves) and whose rollout includes it.
 * Costs the agent's functions in lookups plus the rules found, whatever the number of rules.
 */
export function effectiveLimits(index: RuleIndex, agent: Agent): EffectiveLimit[] {
  let sigs: string[] | undefined
  const found: Entry[] = []
  const add = (list: Entry[]) => {
    for (const e of list) found.push(e)
  }
  const take = (byMatch: ByMatch | undefined) => {
    if (!byMatch) return
    // Few matches under this key: each is checked; many: only the agent's own label subsets.
    if (byMatch.size <= 16) {
      for (const list of byMatch.values()) if (matches(list[0].rule.match, agent)) add(list)
      return
    }
    sigs ??= agentSignatures(agent)
    for (const sig of sigs) {
      const list = byMatch.get(sig)
      if (list) add(list)
    }
  }
  take(index.service.get('*'))
  take(index.service.get(agent.agent_id))
  if (agent.name !== agent.agent_id) take(index.service.get(agent.name))
  for (const f of agent.functions) take(index.fn.get(f))
  // In the sets' order, each rule once (a function listed twice finds its rules twice).
  found.sort((x, y) => x.order - y.order)
  const buckets = new Map<string, number>()
  const out: EffectiveLimit[] = []
  let last = -1
  for (const { set, rule, order } of found) {
    if (order === last) continue
    last = order
    let b = buckets.get(set.rateLimitId)
    if (b === undefined) {
      b = bucket(set.rateLimitId, agent.agent_id)
      buckets.set(set.rateLimitId, b)
    }
    if (b >= rule.percent) continue
    out.push({
      rateLimitId: set.rateLimitId,
      name: set.name,
      resource: set.resource,
      action: set.action,
      limit: set.limit,
      window: set.window,
      scope: rule.scope,
      key: rule.key,
      limitQps: rule.limitQps,
      percent: rule.percent,
      bucket: b,
    })
  }
  return out
}

/**
 * What a heartbeat's limits depend on besides the sets: the agent's name, labels and functions.
 * A limits answer kept for an agent is used again only while this is unchanged.
 */
export function agentFingerprint(a: Agent): bigint | number {
  return Bun.hash(
    [a.agent_id, a.name, a.game_id, a.env, a.region ?? '\u0001', a.zone ?? '\u0001', ...a.functions].join(
      '\u0000',
    ),
  )
}

import type { Agent } from '../agents/schema'
import { LABELS, bucket, matches } from './limits'
import type { PreviewBody, Rule } from './schema'

/**
 * Agents a preview lists at the top, and agent ids it lists per rule (`agents`, `rollout`), the
 * first by agent_id; the counts beside them (`matched`, `rollout_matched`) and `current_qps` cover
 * every agent. 200 rules over 1,000 agents of 1,000 functions had made one preview 4.9 MB and
 * held the loop 950 ms (8 at once 6.8 s).
 */
export const MAX_PREVIEW_AGENTS = 1_000
export const MAX_RULE_AGENTS = 100

/**
 * The registered agents by what the preview's rules name (their functions, keys and labels),
 * built once per preview: a function no rule names is not indexed.
 */
function indexAgents(agents: Agent[], named: Set<string>) {
  const by = {
    fn: new Map<string, Agent[]>(),
    name: new Map<string, Agent[]>(),
    label: Object.fromEntries(LABELS.map((l) => [l, new Map<string, Agent[]>()])) as Record<
      (typeof LABELS)[number],
      Map<string, Agent[]>
    >,
  }
  const add = (m: Map<string, Agent[]>, k: string, a: Agent) => {
    const list = m.get(k)
    if (list) {
      if (list[list.length - 1] !== a) list.push(a)
    } else m.set(k, [a])
  }
  // In agent_id order (as listed), so every list is.
  for (const a of agents) {
    if (named.size) for (const f of a.functions) if (named.has(f)) add(by.fn, f, a)
    add(by.name, a.agent_id, a)
    add(by.name, a.name, a)
    for (const l of LABELS) if (a[l] !== undefined) add(by.label[l], a[l]!, a)
  }
  return by
}

/**
 * The rule set's impact on the registered agents (upstream's preview): the agents any rule binds,
 * with their current load, and per rule the effective limit, limitQps x percent / 100. Each rule
 * reads only the agents its key or its narrowest label names.
 */
export function preview(set: PreviewBody, agents: Agent[]) {
  const by = indexAgents(agents, new Set(set.rules.filter((r) => r.scope === 'function').map((r) => r.key)))
  const candidates = (rule: Rule): Agent[] => {
    if (rule.scope === 'function') return by.fn.get(rule.key) ?? []
    if (rule.key !== '*') return by.name.get(rule.key) ?? []
    let narrowest = agents
    for (const l of LABELS) {
      const v = rule.match[l]
      if (v === undefined) continue
      const list = by.label[l].get(v) ?? []
      if (list.length < narrowest.length) narrowest = list
    }
    return narrowest
  }
  const id = set.rateLimitId
  // Each agent's bucket once: the set's id is the same for every rule.
  const buckets = new Map<string, number>()
  const bucketOf = (a: Agent) => {
    let b = buckets.get(a.agent_id)
    if (b === undefined) {
      b = bucket(id!, a.agent_id)
      buckets.set(a.agent_id, b)
    }
    return b
  }
  const ids = (list: Agent[]) => list.slice(0, MAX_RULE_AGENTS).map((a) => a.agent_id)
  const bound = new Set<Agent>()
  const rules = set.rules.map((rule, index) => {
    const hit = candidates(rule).filter((a) => matches(rule.match, a))
    for (const a of hit) bound.add(a)
    const rollout = id ? hit.filter((a) => bucketOf(a) < rule.percent) : undefined
    return {
      index,
      scope: rule.scope,
      key: rule.key,
      effective_qps: Math.round(((rule.limitQps * rule.percent) / 100) * 1000) / 1000,
      matched: hit.length,
      agents: ids(hit),
      // The load the rule would see now: what the bound agents serve together.
      current_qps: Math.round(hit.reduce((n, a) => n + a.qps, 0) * 1000) / 1000,
      // Which of them enforce it (their heartbeat's limits): the rollout hashes the set's id.
      ...(rollout ? { rollout_matched: rollout.length, rollout: ids(rollout) } : {}),
    }
  })
  // In the store's agent_id order, as each rule's list.
  const list = bound.size === agents.length ? agents : agents.filter((a) => bound.has(a))
  return {
    matched: list.length,
    agents: list.slice(0, MAX_PREVIEW_AGENTS).map((a) => ({
      agent_id: a.agent_id,
      game_id: a.game_id,
      env: a.env,
      region: a.region ?? null,
      zone: a.zone ?? null,
      qps: a.qps,
      qps_1m: a.qps_1m,
      status: a.status,
    })),
    rules,
  }
}

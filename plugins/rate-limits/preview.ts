import type { Agent } from '../agents/schema'
import { binds, bucket } from './limits'
import type { PreviewBody } from './schema'

/**
 * The rule set's impact on the registered agents (upstream's preview): the agents any rule binds,
 * with their current load, and per rule the effective limit, limitQps x percent / 100.
 */
export function preview(set: PreviewBody, agents: Agent[]) {
  const bound = new Map<string, Agent>()
  const rules = set.rules.map((rule, index) => {
    const hit = agents.filter((a) => binds(rule, a))
    for (const a of hit) bound.set(a.agent_id, a)
    const id = set.rateLimitId
    return {
      index,
      scope: rule.scope,
      key: rule.key,
      effective_qps: Math.round(((rule.limitQps * rule.percent) / 100) * 1000) / 1000,
      agents: hit.map((a) => a.agent_id),
      // The load the rule would see now: what the bound agents serve together.
      current_qps: Math.round(hit.reduce((n, a) => n + a.qps, 0) * 1000) / 1000,
      // Which of them enforce it (their heartbeat's limits): the rollout hashes the set's id.
      ...(id
        ? { rollout: hit.filter((a) => bucket(id, a.agent_id) < rule.percent).map((a) => a.agent_id) }
        : {}),
    }
  })
  const list = [...bound.values()].sort((x, y) => x.agent_id.localeCompare(y.agent_id))
  return {
    matched: list.length,
    agents: list.map((a) => ({
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

import { createHash } from 'node:crypto'
import type { Agent, EffectiveLimit } from '../agents/schema'
import type { Rule, StoredSet } from './schema'

const matches = (rule: Rule, a: Agent) =>
  Object.entries(rule.match).every(([label, v]) => a[label as keyof Agent] === v)

/** Whether a rule binds an agent: its labels match, and its key names the agent or the function it serves. */
export function binds(rule: Rule, a: Agent): boolean {
  if (!matches(rule, a)) return false
  if (rule.scope === 'function') return a.functions.includes(rule.key)
  return rule.key === '*' || rule.key === a.agent_id || rule.key === a.name
}

/**
 * An agent's rollout bucket for a rule set, 0-99: the first four bytes of
 * SHA-256(`rateLimitId:agent_id`) as an unsigned big-endian integer, mod 100. Stable: the same
 * agent is in or out of a set's rollout on every heartbeat and every instance, and raising a
 * rule's percent only adds agents. Salted by the set, so one agent is not the first 10% of every set.
 */
export function bucket(rateLimitId: string, agentId: string): number {
  return createHash('sha256').update(`${rateLimitId}:${agentId}`).digest().readUInt32BE(0) % 100
}

/** Whether a rule's rollout includes the agent: its bucket for the set is below the percent. */
export const inRollout = (set: Pick<StoredSet, 'rateLimitId'>, rule: Rule, agentId: string) =>
  bucket(set.rateLimitId, agentId) < rule.percent

/**
 * The limits an agent enforces: each rule of an enabled (status on) set that binds the agent (its
 * labels match, its key names the agent or a function it serves) and whose rollout includes it.
 */
export function effectiveLimits(sets: StoredSet[], agent: Agent): EffectiveLimit[] {
  const out: EffectiveLimit[] = []
  for (const set of sets) {
    if (set.status !== 'on') continue
    const b = bucket(set.rateLimitId, agent.agent_id)
    for (const rule of set.rules) {
      if (b >= rule.percent || !binds(rule, agent)) continue
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
  }
  return out
}

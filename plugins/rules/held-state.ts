import { keptKey } from '../../core/digest'
import { cut } from '../../core/event-bounds'
import type { CompiledRule } from './rule'

/*
 * What the rule engine (engine.ts) holds in memory per instance for `for`, `group_by` and
 * `inhibit`, and its bounds.
 */

export interface Folded {
  rule: CompiledRule
  key: Record<string, unknown>
  /** The first `MAX_FOLDED_LINES` folded notifications, as the summary lists them. */
  events: FoldedLine[]
  /** How many were folded in all. */
  count: number
  channels?: string[]
}

/** What a group summary keeps of one folded notification. */
export interface FoldedLine {
  type: string
  level: string
  title: string
}

/**
 * What the rule engine keeps in memory of what notifications send (a `trigger` token's to choose):
 * the lines of one group summary, the characters of a title or of a grouping value kept, the
 * characters of a key before it is kept as its hash, and the entries of each state. A trigger
 * token's 8 MB params folded under a rule had grown the server by 400 MB every 50 requests.
 */
export const MAX_FOLDED_LINES = 100
const MAX_KEPT_TEXT = 256
const MAX_KEY = 512
export const MAX_STATE = 10_000

/** A title or a grouping value as kept: text cut to MAX_KEPT_TEXT characters, a longer value of another kind named by its length. */
export function kept(v: unknown): unknown {
  if (typeof v === 'string') return v.length > MAX_KEPT_TEXT ? `${cut(v, MAX_KEPT_TEXT)}…` : v
  if (v === null || typeof v !== 'object') return v
  const json = JSON.stringify(v)
  return json.length > MAX_KEPT_TEXT ? `(a value of ${json.length} characters)` : v
}

/** Drops the oldest entry of a state past MAX_STATE (a Map keeps insertion order). */
export function bound(m: Map<string, unknown>) {
  if (m.size > MAX_STATE) m.delete(m.keys().next().value as string)
}

/** A state's key as kept: past MAX_KEY characters, its SHA-256 (a grouping value of megabytes). */
export function stateKey(key: string): string {
  return keptKey(key, MAX_KEY)
}

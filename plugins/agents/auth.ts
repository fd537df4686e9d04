import { createHmac, timingSafeEqual } from 'node:crypto'
import { Elysia } from 'elysia'
import type { RequestGuard } from '../../core/auth/guard'
import type { Permission } from '../../core/auth/roles'
import { Forbidden, Unauthorized } from '../../core/http'
import type { Registration } from './store'

/**
 * Agent credentials, sent in `X-Agent-Token`:
 * - the shared agent token (`plugins.agents.token`): the fleet's credential. It registers any
 *   agent and reaches every agent's routes.
 * - an agent key (`lak_...`), answered by each registration: it names one agent and reaches only
 *   that agent's routes (heartbeat, invocations, limits); another agent's is 403. Its MAC (keyed
 *   by the shared token, so rotating the token retires every key) covers the agent_id, the game
 *   and a random value stored with the registration, and each use is checked against the stored
 *   row: deleting the agent ends its keys, and its id registered again (under any game) answers
 *   a new one. A key over the id alone had kept working for whoever registered the id next.
 *   Rows registered before that (no random value) keep their id-only key until they register again.
 */
const PREFIX = 'lak_'

const same = (a: Buffer, b: Buffer) => a.length === b.length && timingSafeEqual(a, b)
const mac = (token: string, agentId: string, reg: Registration) =>
  reg.key_nonce === null
    ? createHmac('sha256', token).update(`liveops agent key\u0000${agentId}`).digest()
    : createHmac('sha256', token)
        .update(`liveops agent key 2\u0000${JSON.stringify([agentId, reg.game_id, reg.key_nonce])}`)
        .digest()

/** The agent key of `agentId`'s registration `reg` under the shared token. */
export function agentKey(token: string, agentId: string, reg: Registration): string {
  return `${PREFIX}${Buffer.from(agentId).toString('base64url')}.${mac(token, agentId, reg).toString('base64url')}`
}

/** How an agent's current registration is found (undefined: not registered). */
export type FindRegistration = (agentId: string) => Promise<Registration | undefined>

/** Who an `X-Agent-Token` value names: the whole fleet (the shared token), one agent (its key), or nobody. */
export async function readAgentToken(
  token: string,
  sent: string | undefined,
  find: FindRegistration,
): Promise<{ agent: string | '*' } | undefined> {
  if (!sent) return undefined
  if (same(Buffer.from(sent), Buffer.from(token))) return { agent: '*' }
  if (!sent.startsWith(PREFIX)) return undefined
  const [id64, sig, extra] = sent.slice(PREFIX.length).split('.')
  if (!id64 || !sig || extra !== undefined) return undefined
  const agentId = Buffer.from(id64, 'base64url').toString()
  const reg = await find(agentId)
  if (!reg) return undefined
  return same(Buffer.from(sig, 'base64url'), mac(token, agentId, reg)) ? { agent: agentId } : undefined
}

type Ctx = {
  request: Request
  headers: Record<string, string | undefined>
  params?: Record<string, string>
  set: { headers: Record<string, unknown> }
}

/** What the OpenAPI description shows as an agent route's security. */
const AGENT_SECURITY = [{ agentToken: [] }]

/**
 * The agent routes' policy, decided before the body is read (like core's guard), so a stranger
 * gets 401 and never a schema description. `agentToken: true` on a route whose path names no
 * agent (registration) takes the shared token only; on a route with `:id`, the shared token or
 * that agent's key. `agentOr: permission` also admits users (and the admin token) by permission,
 * through core's guard: an agent reading its own limits, an operator reading anyone's.
 */
export function agentAuth(token: () => string, find: FindRegistration, guard: RequestGuard) {
  const check = async (ctx: Ctx) => {
    const sent = ctx.headers['x-agent-token']
    // No agent credential at all is 401 whatever the setting: the route knows no other credential.
    if (!sent) throw new Unauthorized('missing X-Agent-Token', 'invalid_agent_token')
    const expected = token()
    if (!expected)
      throw new Forbidden('agent registration is disabled: set plugins.agents.token', 'agents_disabled')
    const who = await readAgentToken(expected, sent, find)
    // One answer for a wrong key and a retired one (its agent deleted or registered again), so a
    // guess learns nothing of which agent ids are registered.
    if (!who)
      throw new Unauthorized(
        'missing or invalid X-Agent-Token (an agent key ends when its agent is deleted: register again with the shared token)',
        'invalid_agent_token',
      )
    if (who.agent === '*') return who
    const target = ctx.params?.id
    if (target === undefined)
      throw new Forbidden('registering takes the shared agent token, not an agent key', 'agent_key_scope')
    if (target !== who.agent)
      throw new Forbidden(
        `this agent key belongs to agent '${who.agent}', not '${target}'`,
        'agent_key_scope',
      )
    return who
  }
  // Agents count in the gateway bucket like users and keys (300 heartbeats at once had all been
  // answered while a user got 429): an agent key under its agent, the shared token's calls
  // under one key, whichever agent they name. Once per request: `parse` and `transform` both check.
  const counted = new WeakSet<Request>()
  const admit = async (ctx: Ctx) => {
    const who = await check(ctx)
    if (counted.has(ctx.request)) return
    counted.add(ctx.request)
    return guard.count(`agent:${who.agent}`, ctx.set.headers)
  }
  return new Elysia({ name: 'agents.auth' }).macro({
    agentToken: (_: true) => ({
      detail: { security: AGENT_SECURITY },
      // Arrow functions, as in core/auth/guard.ts: Elysia could not read the minified method.
      parse: async (ctx: Ctx) => {
        await admit(ctx)
      },
      transform: async (ctx: Ctx) => {
        await admit(ctx)
      },
    }),
    agentOr: (permission: Permission) => {
      const user = guard.permission(permission)
      return {
        detail: { security: [...AGENT_SECURITY, { bearer: [] }, { adminToken: [] }] },
        transform: async (ctx: Ctx) => {
          if (ctx.headers['x-agent-token'] !== undefined) return admit(ctx)
          const headers: Record<string, string> = {}
          await user(ctx.request, headers)
          Object.assign(ctx.set.headers, headers)
        },
      }
    },
  })
}

import { newId } from '../../core/db'
import { sha256Hex } from '../../core/digest'
import { invalidField } from '../../core/http'
import type { ChannelManager } from './channels'
import type { Dispatcher } from './queue'
import { MAX_DELIVERY_RECIPIENTS, type NotifyBody, type NotifyConfig, type Route } from './schema'
import type { DeliveryRow, NotificationRow, QueueStore } from './store'
import { type TemplateStore, render } from './templates'

export interface Failure {
  channel: string
  error: string
}
export type NotifyResult =
  | {
      code: 0
      message: 'ok'
      data: {
        notification_id: string
        task_ids: string[]
        accepted: string[]
        failed?: Failure[]
        /** Set when a rule held the notification back: nothing was delivered. */
        held?: { rule?: string; reason: string; detail: string }
      }
    }
  | { code: 422; message: string; data: { notification_id: string; accepted: never[]; failed: Failure[] } }

/** A group member (spec 2 "Group"): no recipients means every recipient of that channel. */
export interface GroupMember {
  channel: string
  recipients?: string[]
}

/** What a router (the rule engine of a later issue) sees of a notification without named channels. */
export interface RoutingInput {
  type: string
  level: string
  title: string
  body: string
  params: Record<string, unknown>
  /**
   * Who sent it, as `notify`'s `caller` names it (`<principal kind>:<id>`, `anonymous` while auth
   * is off); absent for the platform's own events. The rules plugin lets only an incident's opener
   * resolve it.
   */
  caller?: string
}

/**
 * What a router decides for a notification without named channels. `channels` are references
 * (channel names or `group:<id>`); without them the static routes decide. `held` means nothing
 * is delivered (suppressed, silenced, pending, folded, inhibited) and why.
 */
export interface RouteDecision {
  channels?: string[]
  /** The rule that decided, shown by the dry run and the answer of a held notification. */
  rule?: string
  held?: { reason: string; detail: string }
  /** Whatever else explains the decision; only the dry run shows it. */
  explain?: Record<string, unknown>
  /** Runs once the deliveries are stored (never on a dry run). */
  accepted?: (r: { notification_id: string; task_ids: string[]; accepted: string[] }) => Promise<void> | void
}

export type Router = (n: RoutingInput, opts: { dryRun: boolean }) => Promise<RouteDecision | undefined>

/** The dry run's answer: the routing decision, with nothing stored or sent. */
export interface DryRun {
  dry_run: true
  /** True when the request named its channels: rules neither route nor suppress those. */
  explicit: boolean
  rule?: string
  /** Channels that would receive a delivery. */
  channels: string[]
  failed?: Failure[]
  held?: { reason: string; detail: string }
  explain?: Record<string, unknown>
}

/**
 * An idempotency key as stored: the caller's and the request's together, hashed (a fixed width on
 * every engine). Keys were shared by every caller: a trigger token's request with an operator's key
 * got the operator's answer, and one sent first kept the operator's notification from being sent.
 */
const idempotencyKey = (caller: string | undefined, key: string) =>
  sha256Hex(`${caller ?? 'platform'}\u0000${key}`)

/**
 * Extension points for the plugins that come later (groups, rules): they register here, so
 * notify never reads their tables. A router answering undefined falls back to the static routes.
 */
export interface NotifyService {
  /**
   * `caller` scopes the idempotency key (a principal's kind and id; the platform's own events
   * when absent): one caller's key never recalls, nor pre-claims, another's answer.
   */
  notify(body: NotifyBody, caller?: string): Promise<NotifyResult>
  /** The routing decision for a notification, without storing or sending anything. */
  dryRun(body: NotifyBody): Promise<DryRun>
  setGroupResolver(fn: (id: string) => Promise<GroupMember[] | undefined>): void
  setRouter(fn: Router): void
  /**
   * More static routes, decided by another plugin (the site plugin's ops notification routing):
   * the channels `fn` names for a notification that named none join those of `routes:` whenever
   * no rule decided (the rules plugin's router wins when it answers). One routing decision, so a
   * platform event is routed once.
   */
  addRoutes(fn: (n: RoutingInput) => Promise<string[]> | string[]): void
  /**
   * A channel another plugin provides and configures (never stored by notify, refused by PUT
   * /config): a slot of provider `type` built from `settings`, with notify's queue, retries,
   * delivery ids and logs. Call it from `onStart` or later; calling again rebuilds it.
   */
  provideChannel(name: string, type: string, settings: Record<string, unknown>): Promise<void>
  /** Reserves channel names starting with `prefix` for `provideChannel`: PUT /config refuses them. Call at setup. */
  reserveChannels(prefix: string): void
}

declare module '../../core/plugin' {
  interface Services {
    notify: NotifyService
  }
}

export function routeMatches(r: Route, type: string, level: string): boolean {
  if (r.levels && !r.levels.includes(level as never)) return false
  if (!r.type || r.type === '*') return true
  return r.type.endsWith('*') ? type.startsWith(r.type.slice(0, -1)) : r.type === type
}

export function notifyService(opts: {
  config: NotifyConfig
  channels: ChannelManager
  templates: TemplateStore
  store: QueueStore
  dispatcher: () => Dispatcher | undefined
}): NotifyService {
  const { config, channels, templates, store } = opts
  /** Keyed requests running in this process: a twin waits for the first instead of racing it. */
  const running = new Map<string, Promise<NotifyResult>>()
  let groups: ((id: string) => Promise<GroupMember[] | undefined>) | undefined
  let router: Router | undefined
  const extraRoutes: Array<(n: RoutingInput) => Promise<string[]> | string[]> = []

  async function content(b: NotifyBody) {
    if (b.template) {
      const tpl = await templates.find(b.template)
      if (!tpl) throw invalidField('body.template', `template '${b.template}' not found`)
      const r = render(tpl, b.params ?? {}, b.data ?? {})
      return { title: r.title, body: r.body, level: b.level ?? r.level }
    }
    if (b.title === undefined && b.body === undefined)
      throw invalidField('body', 'give a template, or a title and/or body')
    return { title: b.title ?? '', body: b.body ?? '', level: b.level ?? 'info' }
  }

  async function decide(b: NotifyBody, dryRun: boolean, caller?: string) {
    const c = await content(b)
    const plan = new Map<string, { targets: Set<string>; recipients: Set<string> }>()
    const failed: Failure[] = []
    const add = (channel: string, target: string, recipients: readonly string[] = []) => {
      const p = plan.get(channel) ?? { targets: new Set<string>(), recipients: new Set<string>() }
      plan.set(channel, p)
      p.targets.add(target)
      for (const r of recipients) p.recipients.add(r)
    }
    const resolve = async (ref: string) => {
      if (ref.startsWith('group:')) {
        const id = ref.slice(6)
        const members = groups ? await groups(id) : undefined
        if (!groups) failed.push({ channel: ref, error: 'groups are not configured' })
        else if (!members) failed.push({ channel: ref, error: `group not found: ${id}` })
        else for (const m of members) add(m.channel, ref, m.recipients)
      } else if (ref.startsWith('user:')) {
        const name = ref.slice(5)
        const user = Object.hasOwn(config.users, name) ? config.users[name] : undefined
        if (!user) failed.push({ channel: ref, error: `user not found: ${name}` })
        else for (const [ch, rcpt] of Object.entries(user)) add(ch, ref, rcpt)
      } else add(ref, ref)
    }
    const refs = [
      ...new Set([...(b.channels ?? []), ...(b.channel ? [b.channel] : []), ...(b.audience ?? [])]),
    ]
    for (const ref of refs) await resolve(ref)
    let routed: RouteDecision | undefined
    if (!refs.length) {
      const input: RoutingInput = {
        type: b.type,
        level: c.level,
        title: c.title,
        body: c.body,
        params: b.params ?? {},
        ...(caller !== undefined ? { caller } : {}),
      }
      routed = router ? await router(input, { dryRun }) : undefined
      if (!routed?.held) {
        const names = routed?.channels ?? [
          ...new Set([
            ...config.routes.filter((r) => routeMatches(r, b.type, c.level)).flatMap((r) => r.channels),
            ...(await Promise.all(extraRoutes.map((fn) => fn(input)))).flat(),
          ]),
        ]
        for (const ref of names) await resolve(ref)
        if (!names.length)
          failed.push({
            channel: '*',
            error: `no channel named and no route matches type '${b.type}' and level '${c.level}'`,
          })
      }
    }
    for (const [ch, rcpt] of Object.entries(b.recipients ?? {})) {
      const p = plan.get(ch)
      if (p) for (const r of rcpt) p.recipients.add(r)
    }
    for (const [ch, p] of plan)
      if (p.recipients.size > MAX_DELIVERY_RECIPIENTS) {
        plan.delete(ch)
        failed.push({
          channel: ch,
          error: `${p.recipients.size} recipients, more than one delivery carries (${MAX_DELIVERY_RECIPIENTS}): split the notification`,
        })
      }
    return { c, plan, failed, routed, explicit: refs.length > 0 }
  }

  /**
   * Stores the notification and its deliveries (none when held) with the answer its idempotency
   * key recalls, in one transaction. Undefined when stored; the first request's answer when another
   * request (on any instance) recorded the key first, in which case nothing of this one was stored.
   */
  async function record(
    key: string | undefined,
    notification: NotificationRow | undefined,
    rows: DeliveryRow[],
    result: NotifyResult,
  ): Promise<NotifyResult | undefined> {
    if (!key && !notification) return undefined
    const stored = await store.accept(
      notification,
      rows,
      key ? { key, result: JSON.stringify(result) } : undefined,
    )
    if (stored || !key) return undefined
    const first = await store.recall(key)
    return first ? (JSON.parse(first) as NotifyResult) : result
  }

  async function process(b: NotifyBody, key: string | undefined, caller?: string): Promise<NotifyResult> {
    const { c, plan, failed, routed } = await decide(b, false, caller)
    if (routed?.held) {
      const result: NotifyResult = {
        code: 0,
        message: 'ok',
        data: {
          notification_id: newId(),
          task_ids: [],
          accepted: [],
          held: { ...(routed.rule ? { rule: routed.rule } : {}), ...routed.held },
        },
      }
      // Held is accepted (code 0): its answer is recorded like any other.
      return (await record(key, undefined, [], result)) ?? result
    }
    const notificationId = newId()
    const now = Date.now()
    const accepted: string[] = []
    const rows: DeliveryRow[] = []
    const raw = JSON.stringify({
      type: b.type,
      template: b.template,
      params: b.params ?? {},
      data: b.data ?? {},
    })
    for (const [ch, p] of plan) {
      const slot = channels.slots.get(ch)
      if (!slot) failed.push({ channel: ch, error: `provider not found: ${ch}` })
      else if (!slot.enabled) failed.push({ channel: ch, error: `provider disabled: ${ch}` })
      else {
        accepted.push(ch)
        rows.push({
          id: newId(),
          notification_id: notificationId,
          channel: ch,
          provider_type: slot.type,
          type: b.type,
          level: c.level,
          targets: JSON.stringify([...p.targets]),
          recipients: JSON.stringify([...p.recipients]),
          title: c.title,
          body: c.body,
          raw,
          attempts: 0,
          created_at: now,
        })
      }
    }
    if (!rows.length)
      return {
        code: 422,
        message: `all channels failed: ${failed.map((f) => `${f.channel}: ${f.error}`).join('; ')}`,
        data: { notification_id: notificationId, accepted: [], failed },
      }
    const task_ids = rows.map((r) => r.id)
    const result: NotifyResult = {
      code: 0,
      message: 'ok',
      data: {
        notification_id: notificationId,
        task_ids,
        accepted,
        ...(failed.length ? { failed } : {}),
      },
    }
    const first = await record(
      key,
      {
        id: notificationId,
        type: b.type,
        level: c.level,
        title: c.title,
        template: b.template ?? null,
        idempotency_key: b.idempotency_key ?? null,
        channels: JSON.stringify(accepted),
        created_at: now,
      },
      rows,
      result,
    )
    // Another instance recorded the key first: its answer, and nothing of this one was stored.
    if (first) return first
    const d = opts.dispatcher()
    for (const ch of accepted) d?.hint(ch)
    await routed?.accepted?.({ notification_id: notificationId, task_ids, accepted })
    return result
  }

  return {
    async notify(b, caller) {
      const key = b.idempotency_key === undefined ? undefined : idempotencyKey(caller, b.idempotency_key)
      if (!key) return process(b, undefined, caller)
      const twin = running.get(key)
      if (twin) {
        // A twin in this process may still be running; wait for it, and run anew only if it was not accepted.
        const r = await twin.catch(() => undefined)
        if (r?.code === 0) return r
      }
      const p = (async () => {
        const first = await store.recall(key)
        return first ? (JSON.parse(first) as NotifyResult) : process(b, key, caller)
      })()
      running.set(key, p)
      try {
        return await p
      } finally {
        if (running.get(key) === p) running.delete(key)
      }
    },
    async dryRun(b) {
      const { plan, failed, routed, explicit } = await decide(b, true)
      const names: string[] = []
      for (const ch of plan.keys()) {
        const slot = channels.slots.get(ch)
        if (!slot) failed.push({ channel: ch, error: `provider not found: ${ch}` })
        else if (!slot.enabled) failed.push({ channel: ch, error: `provider disabled: ${ch}` })
        else names.push(ch)
      }
      return {
        dry_run: true,
        explicit,
        ...(routed?.rule ? { rule: routed.rule } : {}),
        channels: names,
        ...(failed.length ? { failed } : {}),
        ...(routed?.held ? { held: routed.held } : {}),
        ...(routed?.explain ? { explain: routed.explain } : {}),
      }
    },
    setGroupResolver(fn) {
      groups = fn
    },
    addRoutes(fn) {
      extraRoutes.push(fn)
    },
    provideChannel: (name, type, settings) => channels.provide(name, type, settings),
    reserveChannels: (prefix) => channels.reserve(prefix),
    setRouter(fn) {
      router = fn
    },
  }
}

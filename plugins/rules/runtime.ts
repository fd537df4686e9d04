import { Generation } from '../../core/generation'
import type { Logger } from '../../core/log'
import type { NotifyService, RouteDecision, RoutingInput } from '../notify/notify'
import { alertKey } from './alert-id'
import type { AlertStore } from './alerts'
import { type Folded, RuleEngine } from './engine'
import { type IncidentStore, callerKind } from './incidents'
import { LEVEL_RANK } from './match'
import { type CompiledRule, compileRule } from './rule'
import type { GroupRecord, RuleRecord, RulesStore } from './store'

/** The opener of an incident that a platform event opened (a notification without a caller). */
const PLATFORM = 'platform'

/** What a roster plugin registers so rules can be silenced (spec 2 "silence: {roster}"). */
export interface RosterSource {
  /** True while a period of the roster covers `now`; false for an unknown roster. */
  covers(roster: string, now: number): boolean
}

const alertIdOf = (p: Record<string, unknown>): string | undefined => {
  const a = Object.hasOwn(p, 'alert_id') ? p.alert_id : undefined
  return (typeof a === 'string' && a !== '') || typeof a === 'number' ? alertKey(String(a)) : undefined
}

/**
 * The live side of the rules plugin: the engine and the groups of this instance, the router
 * notify calls, the folding summaries, the sync that picks up other instances' changes and the
 * firing of due escalations (both run on core's schedule: the sync on every instance, the
 * escalations once per tick across them).
 */
export function rulesRuntime(opts: {
  store: RulesStore
  notify: NotifyService
  alerts?: AlertStore
  incidents?: IncidentStore
  log: Logger
  /** Tells the other instances that rules or groups changed (core's change notices). */
  publish?: () => void
}) {
  const { store, notify, alerts, incidents, log } = opts
  let rosters: RosterSource | undefined
  let groups = new Map<string, GroupRecord>()
  let revs: Record<string, number> = {}
  let running: Promise<void> | undefined
  let again = false
  /** Runs a sync now, or right after the one under way (which may have read before the change). */
  const kick = () => {
    if (running) {
      again = true
      return
    }
    running = sync()
      .catch((e) => log.error('rules sync failed', { error: String(e) }))
      .finally(() => {
        running = undefined
        if (again) {
          again = false
          kick()
        }
      })
  }

  /** Rule and group writes this instance applied itself (`put`, `remove`, `putGroup`, `removeGroup`), for `sync`. */
  const ownWrites = new Generation()
  const ownWrite = (rev: number, kind: 'rules' | 'groups' = 'rules') => {
    ownWrites.bump()
    // No revision row yet is revision 0 (the first write of a kind makes 1).
    if ((revs[kind] ?? 0) === rev - 1) revs = { ...revs, [kind]: rev }
  }

  const engine = new RuleEngine({
    silenced: (roster, now) => rosters?.covers(roster, now) ?? false,
    onFolded: (f) => void summary(f).catch((e) => log.error('group summary failed', { error: String(e) })),
  })

  async function summary(f: Folded) {
    const first = f.events[0]
    const level = f.events.reduce(
      (a, e) => ((LEVEL_RANK[e.level] ?? 0) > (LEVEL_RANK[a] ?? 0) ? e.level : a),
      first.level,
    )
    await notify.notify({
      type: first.type,
      level: level as 'info',
      title: `${f.count} more like: ${first.title}`,
      body: [
        ...f.events.map((e) => `- [${e.level}] ${e.title}`),
        ...(f.count > f.events.length ? [`- and ${f.count - f.events.length} more`] : []),
      ].join('\n'),
      params: { ...f.key, folded: f.count, folded_by: f.rule.rule.id },
      ...(f.channels ? { audience: f.channels } : {}),
    })
  }

  async function route(n: RoutingInput, { dryRun }: { dryRun: boolean }): Promise<RouteDecision | undefined> {
    const alertId = alertIdOf(n.params)
    const resolving = n.params.status === 'resolved'
    const caller = n.caller ?? PLATFORM
    if (!dryRun && alertId) {
      // The caller's own open incident of the alert, else another credential's (whose resolve is refused).
      const open = await incidents?.openFor(alertId, caller)
      if (incidents && open) {
        let holds = true
        const rule = engine.list().find((c) => c.rule.id === open.rule_id)
        try {
          holds = rule ? rule.match(n) : true
        } catch {
          holds = true
        }
        // Only the credential that opened the incident resolves it, either way, and cancels its own
        // escalation: another's resolve is noted in the timeline, and the escalation stays armed.
        if (
          (resolving || !holds) &&
          (await incidents.resolve(
            alertId,
            resolving ? 'alert resolved' : `rule '${open.rule_id}' no longer matches`,
            caller,
          ))
        )
          await alerts?.cancel(alertId, caller, true)
      } else if (resolving && alerts) {
        // No open incident decides (the ledger is off, or none is open): only the credential that
        // armed an escalation cancels it and ends the acknowledgement. Another's is refused
        // without failing its notification, and logged with its kind of credential only.
        if (!(await alerts.cancel(alertId, caller)))
          log.warn('escalation cancel refused: another credential armed it', {
            alert_id: alertId,
            caller: callerKind(caller),
          })
      }
    }
    const { outcome: out, shadow } = engine.evaluate(n, dryRun)
    if (!out) return dryRun ? { explain: { matched: false, shadow_matches: shadow } } : undefined
    const c = out.rule
    const decision: RouteDecision = {
      rule: c.rule.id,
      ...(out.channels ? { channels: out.channels } : {}),
      ...(out.held ? { held: out.held } : {}),
      explain: {
        matched: true,
        action: c.rule.action,
        priority: c.rule.priority ?? 0,
        shadow_matches: out.shadow,
        ...(c.escalation && alertId
          ? { escalation: { to: c.escalation.to, ack_timeout_ms: c.escalation.ackTimeoutMs } }
          : {}),
      },
    }
    if (!out.held && alertId && !resolving && !n.params.escalated)
      decision.accepted = (r) =>
        // The deliveries are stored: a ledger or escalation fault is logged, never turned into a failed send.
        recordDelivery(c, alertId, n, r).catch((e) =>
          log.error('incident or escalation not recorded', { alert_id: alertId, error: String(e) }),
        )
    return decision
  }

  /** A rule-routed delivery for an alert: the incident ledger, then the escalation (once armed, kept). */
  async function recordDelivery(
    c: CompiledRule,
    alertId: string,
    n: RoutingInput,
    r: { notification_id: string; accepted: string[] },
  ) {
    const caller = n.caller ?? PLATFORM
    await incidents?.record(c.rule.id, alertId, n, r.accepted, r.notification_id, caller)
    if (!c.escalation || !alerts) return
    const armed = await alerts.arm({
      alert_id: alertId,
      rule_id: c.rule.id,
      due_at: Date.now() + c.escalation.ackTimeoutMs,
      to: c.escalation.to,
      title: n.title,
      level: n.level,
      armed_by: caller,
    })
    if (armed) await incidents?.note(alertId, caller, 'escalation_armed', { to: c.escalation.to })
  }

  /** Fires the escalations that came due; each is claimed by exactly one instance. */
  async function fireDue() {
    if (!alerts) return
    for (const e of await alerts.claimDue()) {
      const r = await notify.notify({
        type: 'escalation',
        level: (e.level in LEVEL_RANK ? e.level : 'critical') as 'critical',
        title: `Escalation: ${e.title}`,
        body: `Alert ${e.alert_id} (rule ${e.rule_id}) was not acknowledged in time.`,
        audience: e.to,
        params: { alert_id: e.alert_id, rule_id: e.rule_id, escalated: true },
      })
      await incidents?.note(e.alert_id, e.armed_by, 'escalated', {
        to: e.to,
        ...(r.code === 0 ? { notification_id: r.data.notification_id } : { error: r.message }),
      })
    }
  }

  /**
   * Picks up changes other instances made (their writes bump a revision). A rule or group this
   * instance saved or removed while the store was being read may be missing from what was read (on
   * PostgreSQL the reads wait on the network, and a request runs in between): installing that
   * would drop the rule and its shadow statistics, or leave a new group without members, until the
   * next sync. Such a read is read again.
   */
  async function sync() {
    const read = await ownWrites.settled(async () => {
      const now = await store.revisions()
      const rules = now.rules !== revs.rules ? await store.listRules() : undefined
      const groupList = now.groups !== revs.groups ? await store.listGroups() : undefined
      return { now, rules, groupList }
    })
    if (!read.settled) return
    const { now, rules, groupList } = read.value
    if (rules) engine.load(rules)
    if (groupList) groups = new Map(groupList.map((g) => [g.id, g]))
    revs = now
  }

  return {
    engine,
    route,
    setRosters(r: RosterSource) {
      rosters = r
    },
    group(id: string) {
      return groups.get(id)?.members
    },
    /**
     * A rule this instance saved, with what compiling it at save time gave (compiled once). When
     * its write was the only one since the last sync, the sync has nothing to reload.
     */
    put(rec: RuleRecord & { rev: number }, compiled = compileRule(rec.rule, rec.seq)) {
      compiled.seq = rec.seq
      engine.upsert(compiled)
      ownWrite(rec.rev)
      opts.publish?.()
    },
    remove(id: string, rev: number) {
      engine.remove(id)
      ownWrite(rev)
      opts.publish?.()
    },
    /**
     * A group this instance saved or removed, with the revision its write made: when it was the
     * only write since the last sync, the sync reloads nothing (it had re-read every group).
     */
    putGroup(g: GroupRecord & { rev: number }) {
      const { rev, ...group } = g
      groups.set(g.id, group)
      ownWrite(rev, 'groups')
      opts.publish?.()
    },
    removeGroup(id: string, rev: number) {
      groups.delete(id)
      ownWrite(rev, 'groups')
      opts.publish?.()
    },
    sync,
    fireDue,
    /** A sync now (or after the one under way), settled when it is done: the scheduled sync. */
    async refresh() {
      kick()
      while (running) await running
    },
    start: sync,
    kick,
    async stop() {
      engine.stop()
      again = false
      await running
    },
  }
}
export type RulesRuntime = ReturnType<typeof rulesRuntime>

import { goneCredentials } from '../../core/auth/gone'
import { definePlugin } from '../../core/plugin'
import { alertStore } from './alerts'
import { chatcard } from './chatcard'
import { incidentStore } from './incidents'
import m001 from './migrations/001_rules.sql' with { type: 'text' }
import m002 from './migrations/002_incident_opener.sql' with { type: 'text' }
import m003 from './migrations/003_escalation_armer.sql' with { type: 'text' }
import m004 from './migrations/004_escalation_per_armer.sql' with { type: 'text' }
import { rulesRoutes } from './routes'
import { type RosterSource, rulesRuntime } from './runtime'
import { RulesConfig } from './schema'
import { rulesStore } from './store'

/** What the rules plugin offers the plugins that depend on it (rosters registers its silences here). */
export interface RulesService {
  setRosters(source: RosterSource): void
}

declare module '../../core/plugin' {
  interface Services {
    rules: RulesService
  }
}

export type { RosterSource } from './runtime'

/**
 * The rule engine of the notification service (spec 2): rules with the match language, groups,
 * alert acknowledgement with escalation, the incident ledger and the chat-card callback. It
 * registers a router and a group resolver into notify, so notify never reads these tables.
 */
export default definePlugin({
  name: 'rules',
  dependsOn: ['notify'],
  config: RulesConfig,
  migrations: [
    { id: 1, name: 'rules', sql: m001 },
    { id: 2, name: 'incident_opener', sql: m002 },
    { id: 3, name: 'escalation_armer', sql: m003 },
    { id: 4, name: 'escalation_per_armer', sql: m004 },
  ],
  // Anyone may call the card callback before it proves itself: it takes what a card sends.
  bodyLimits: { '/api/v1/callbacks/chatcard': 64 * 1024 },
  permissions: {
    rules: { write: ['operator'] },
    alerts: { write: ['operator'] },
    incidents: { write: ['operator'] },
  },
  setup(ctx) {
    const cfg = ctx.config
    const notify = ctx.service('notify')
    const store = rulesStore(ctx.db)
    // What a deleted user or a revoked token opened or armed goes to the next credential that resolves it.
    const gone = (callers: readonly string[]) => goneCredentials(ctx.db, callers)
    const incidents = cfg.incidents ? incidentStore(ctx.db, gone) : undefined
    const alerts = cfg.acks ? alertStore(ctx.db, incidents, gone) : undefined
    const runtime = rulesRuntime({
      store,
      notify,
      alerts,
      incidents,
      log: ctx.log,
      publish: () => void ctx.changes.publish('rules', {}),
    })
    // Another instance's rule or group change applies as soon as it says so; the poll is the safety net.
    ctx.changes.on('rules', (_d, origin) => {
      if (origin === 'remote') runtime.kick()
    })
    if (cfg.engine) notify.setRouter(runtime.route)
    if (cfg.groups) notify.setGroupResolver(async (id) => runtime.group(id))
    ctx.provide('rules', { setRosters: runtime.setRosters })
    ctx.health('rules', () => ({ status: 'up', rules: runtime.engine.list().length }), { critical: false })
    ctx.onStart(() => runtime.start())
    ctx.onStop(() => runtime.stop())
    // The poll is this instance's cache; an escalation is fired by one instance per tick.
    ctx.schedule('rules.sync', cfg.sync_ms, () => runtime.refresh(), { perInstance: true })
    if (alerts) ctx.schedule('rules.escalations', cfg.sync_ms, () => runtime.fireDue())
    return rulesRoutes({
      ctx,
      store,
      runtime,
      alerts,
      incidents,
      callback: chatcard({
        encryptKey: cfg.chatcard.encrypt_key,
        verificationToken: cfg.chatcard.verification_token,
        requireSignature: cfg.chatcard.require_signature,
        alerts: () => alerts,
        shared: ctx.shared,
      }),
    })
  },
})

import { Kind } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import type { Db } from '../../core/db'
import { fromJson } from '../../core/db'
import { Conflict, Invalid, NotFound, invalidField } from '../../core/http'
import type { Logger } from '../../core/log'
import type { Outbound } from '../../core/outbound'
import type { Provider, ProviderRegistry } from '../../core/plugin'
import type { ChannelConfig } from './schema'
import { channelMasking, expandEnv, providerDefinition, refusedSetting, splitConfig } from './settings'

/** One configured channel: its settings and the live provider built from them, swapped as a whole. */
export interface Slot {
  name: string
  type: string
  settings: Record<string, unknown>
  module?: string
  enabled: boolean
  provider?: Provider
  /** `settings` with their `$VAR` references expanded: what the provider (and a remote worker) gets. */
  effective: Record<string, unknown>
  /** 'available', or the reason the provider could not be built. */
  status: string
  since: number
  /** Where its settings live: the YAML, a runtime change (PUT /config), or another plugin (`provide`). */
  source: 'yaml' | 'runtime' | 'plugin'
  updatedAt: number
}

/** The target did not answer the pre-swap check: a runtime condition, not a configuration mistake. */
class VerifyFailed extends Invalid {}

type StoredRow = {
  name: string
  type: string | null
  config: string | null
  enabled: number | null
  updated_at: number
}

/**
 * The channel slots. A slot's provider is looked up at send time, so PUT /config and
 * enable/disable take effect for the next send. A new configuration is built and verified before
 * the swap; on failure the old provider stays and the caller gets a 4xx. Runtime changes are
 * stored in `notify_channels` and win over the YAML at the next start.
 */
export function channelManager(opts: {
  db: Db
  registry: ProviderRegistry
  log: Logger
  /** Channels from the API connect under the outbound policy; the YAML's through `outbound.trusted`. */
  outbound: Outbound
  /** Field names the log masks (`log.sensitive_fields`): masked here too, for schemas that mark nothing. */
  sensitive: readonly string[]
  yaml: Record<string, ChannelConfig>
  /** `plugins.notify.api_env`: the variables settings from the API may name. */
  apiEnv?: readonly string[]
  env?: Record<string, string | undefined>
  /** A runtime change made here (PUT /config, enable/disable): other instances are told to sync. */
  onLocalChange?: (name: string) => void
}) {
  const { db, registry, log } = opts
  const slots = new Map<string, Slot>()
  const listeners: Array<(name: string) => void> = []
  const { mask, unmask } = channelMasking(registry, opts.sensitive)
  const apiEnv = new Set(opts.apiEnv ?? [])
  const env = opts.env ?? process.env
  /** Newest stored change seen, for picking up changes other instances made. */
  let seenUntil = 0
  /** Name prefixes other plugins provide channels under (`reserve`): PUT /config refuses them. */
  const reserved: string[] = []

  /**
   * Expands `$VAR` references (all variables for the YAML, the `api_env` ones for the API),
   * validates against the provider's schema, creates the provider and verifies it.
   */
  async function build(
    name: string,
    type: string,
    module: string | undefined,
    settings: Record<string, unknown>,
    field: string,
    source: Slot['source'],
  ): Promise<{ provider: Provider; effective: Record<string, unknown> }> {
    const def = await providerDefinition(registry, type, module, field)
    const expanded = def.expandEnv
      ? expandEnv(
          settings,
          env,
          // The API may also keep a reference the operator's YAML wrote for this very setting
          // (a GET-modify-PUT of a YAML channel sends its `$VAR` back).
          source === 'yaml'
            ? 'all'
            : (n, key) =>
                apiEnv.has(n) || (opts.yaml[name] as Record<string, unknown> | undefined)?.[key] === `$${n}`,
          field,
        )
      : settings
    // A provider file outside the repo may not reach TypeBox; a plain schema is its own to check in create.
    const typed = Kind in def.config
    const value = (
      typed ? Value.Default(def.config, Value.Clone(expanded)) : Value.Clone(expanded)
    ) as Record<string, unknown>
    const first = typed ? Value.Errors(def.config, value).First() : undefined
    if (first) {
      const at = first.path.split('/').filter(Boolean).join('.')
      throw invalidField(`${field}.config${at ? `.${at}` : ''}`, first.message)
    }
    let provider: Provider
    try {
      provider = await def.create(value as never, {
        log: log.child(`provider:${name}`),
        outbound: source === 'yaml' ? opts.outbound.trusted : opts.outbound,
      })
    } catch (e) {
      throw new Invalid(`channel '${name}': ${(e as Error).message}`, {
        field: `${field}.config${refusedSetting(e)}`,
        reason: (e as Error).message,
      })
    }
    try {
      await provider.verify?.()
    } catch (e) {
      await provider.close?.().catch(() => undefined)
      throw new VerifyFailed(`channel '${name}': verification failed: ${(e as Error).message}`, {
        field: `${field}.config`,
        reason: (e as Error).message,
      })
    }
    return { provider, effective: value }
  }

  function changed(name: string) {
    for (const fn of listeners) fn(name)
  }

  return {
    slots,
    onChange(fn: (name: string) => void) {
      listeners.push(fn)
    },

    /** YAML first, then the stored runtime changes over it; a channel that cannot be built is kept with its error as status. */
    async start() {
      const stored = new Map(
        (await db.all<StoredRow>('SELECT name, type, config, enabled, updated_at FROM notify_channels')).map(
          (r) => [r.name, r],
        ),
      )
      for (const r of stored.values()) seenUntil = Math.max(seenUntil, Number(r.updated_at))
      const names = new Set([...Object.keys(opts.yaml), ...stored.keys()])
      for (const name of names) {
        const y = opts.yaml[name] ? splitConfig(opts.yaml[name]) : undefined
        const s = stored.get(name)
        const type = s?.type ?? y?.type
        if (!type) continue
        if (y && !s?.type && !registry.get(y.type) && !y.module)
          throw new Error(
            `plugins.notify.channels.${name}.type: unknown provider type '${y.type}'; known: ${registry.list().join(', ')}`,
          )
        const settings = s?.config ? fromJson<Record<string, unknown>>(s.config, {}) : (y?.settings ?? {})
        const slot: Slot = {
          name,
          type,
          settings,
          effective: settings,
          module: s?.type && s.type !== y?.type ? undefined : y?.module,
          enabled: s?.enabled !== null && s?.enabled !== undefined ? !!s.enabled : (y?.enabled ?? true),
          status: 'available',
          since: Date.now(),
          source: s?.config ? 'runtime' : 'yaml',
          updatedAt: s?.updated_at ?? Date.now(),
        }
        try {
          const built = await build(
            name,
            type,
            slot.module,
            settings,
            `plugins.notify.channels.${name}`,
            slot.source,
          )
          slot.provider = built.provider
          slot.effective = built.effective
        } catch (e) {
          // A YAML mistake stops startup like any config error; an unreachable target or a stored
          // change that no longer builds leaves the channel in error, fixable through PUT /config.
          if (slot.source === 'yaml' && !(e instanceof VerifyFailed))
            throw new Error(`plugins.notify.channels.${name}: ${(e as Error).message}`)
          slot.status = `error: ${(e as Error).message}`
          log.error('channel could not be built', { channel: name, error: (e as Error).message })
        }
        slots.set(name, slot)
      }
    },

    /**
     * Applies runtime changes other instances sharing the store made (PUT /config, enable/disable).
     * The window reaches back a few seconds so clock skew between instances loses nothing; a change
     * this slot already carries is skipped.
     */
    async sync() {
      const rows = await db.all<StoredRow>(
        'SELECT name, type, config, enabled, updated_at FROM notify_channels WHERE updated_at > ?',
        [seenUntil - 10_000],
      )
      for (const r of rows) {
        const at = Number(r.updated_at)
        seenUntil = Math.max(seenUntil, at)
        const slot = slots.get(r.name)
        if (slot && slot.updatedAt >= at) continue
        const enabled = r.enabled === null ? (slot?.enabled ?? true) : !!r.enabled
        if (
          r.type &&
          r.config !== null &&
          (!slot || slot.type !== r.type || JSON.stringify(slot.settings) !== r.config)
        ) {
          const settings = fromJson<Record<string, unknown>>(r.config, {})
          try {
            const built = await build(
              r.name,
              r.type,
              slot?.type === r.type ? slot.module : undefined,
              settings,
              `channel ${r.name}`,
              'runtime',
            )
            // A provider's build may take seconds: a newer change (here, or a parallel sync's) stays.
            const now = slots.get(r.name)
            if (now && now.updatedAt >= at) {
              await built.provider.close?.().catch(() => undefined)
              continue
            }
            const old = now?.provider
            slots.set(r.name, {
              name: r.name,
              type: r.type,
              settings,
              effective: built.effective,
              module: slot?.type === r.type ? slot.module : undefined,
              enabled: r.enabled === null ? (now?.enabled ?? true) : !!r.enabled,
              provider: built.provider,
              status: 'available',
              since: at,
              source: 'runtime',
              updatedAt: at,
            })
            if (old?.close) setTimeout(() => void old.close?.().catch(() => undefined), 35_000).unref?.()
          } catch (e) {
            log.error('a stored channel change could not be applied', {
              channel: r.name,
              error: (e as Error).message,
            })
            continue
          }
        } else if (slot) {
          if (slot.enabled !== enabled) slot.since = at
          slot.enabled = enabled
          slot.updatedAt = at
        }
        changed(r.name)
      }
    },

    async stop() {
      for (const s of slots.values()) await s.provider?.close?.().catch(() => undefined)
    },

    /** Channels named `prefix...` are another plugin's to provide: PUT /config refuses them. */
    reserve(prefix: string) {
      reserved.push(prefix)
    },

    /**
     * A channel another plugin provides (the site plugin's operations channels): built now, never
     * stored here, configured only through that plugin, so PUT /config and enable/disable refuse it.
     * Providing it again rebuilds it.
     */
    async provide(name: string, type: string, settings: Record<string, unknown>) {
      const prev = slots.get(name)
      if (prev?.source === 'yaml')
        throw new Error(`channel '${name}' is configured in plugins.notify already`)
      // One stored through PUT /config before its name was reserved gives way (it had stopped the start).
      if (prev?.source === 'runtime') {
        log.warn('a stored channel gives way to the one a plugin provides', { channel: name })
        await db.run('DELETE FROM notify_channels WHERE name = ?', [name])
      }
      const built = await build(name, type, undefined, settings, `channel ${name}`, 'plugin')
      const now = Date.now()
      slots.set(name, {
        name,
        type,
        settings,
        effective: built.effective,
        enabled: true,
        provider: built.provider,
        status: 'available',
        since: now,
        source: 'plugin',
        updatedAt: now,
      })
      await prev?.provider?.close?.().catch(() => undefined)
      changed(name)
    },

    get(name: string): Slot {
      const s = slots.get(name)
      if (!s) throw new NotFound(`provider not found: ${name}`)
      return s
    },

    /** The configuration as read by GET /config/{name}: secrets masked. */
    view(name: string) {
      const s = this.get(name)
      return {
        name: s.name,
        type: s.type,
        enabled: s.enabled,
        status: s.status,
        source: s.source,
        updated_at: new Date(s.updatedAt).toISOString(),
        config: mask(s.type, s.settings) as Record<string, unknown>,
      }
    },

    /** PUT /config/{name}: build and verify, then swap and store; the old provider stays on failure. */
    async put(name: string, body: { type?: string; enabled?: boolean; config: Record<string, unknown> }) {
      if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(name))
        throw invalidField('params.name', 'letters, digits, dot, dash and underscore, 1-64')
      if ('module' in body.config)
        throw invalidField(
          'body.config.module',
          'provider modules load only from the YAML, never through the API',
        )
      if ('type' in body.config || 'enabled' in body.config)
        throw invalidField('body.config', "'type' and 'enabled' go beside config, not inside it")
      const prev = slots.get(name)
      if (prev?.source === 'plugin' || reserved.some((p) => name.startsWith(p))) throw providedElsewhere(name)
      const type = body.type ?? prev?.type
      if (!type) throw invalidField('body.type', `required: channel '${name}' does not exist yet`)
      const sameType = prev?.type === type
      const settings = sameType ? unmask(type, body.config, prev?.settings) : body.config
      const built = await build(name, type, sameType ? prev?.module : undefined, settings, 'body', 'runtime')
      const now = Date.now()
      const enabled = body.enabled ?? prev?.enabled ?? true
      await db.run(
        `INSERT INTO notify_channels (name, type, config, enabled, updated_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (name) DO UPDATE SET type = excluded.type, config = excluded.config, enabled = excluded.enabled, updated_at = excluded.updated_at`,
        [name, type, JSON.stringify(settings), enabled ? 1 : 0, now],
      )
      const old = prev?.provider
      slots.set(name, {
        name,
        type,
        settings,
        effective: built.effective,
        module: sameType ? prev?.module : undefined,
        enabled,
        provider: built.provider,
        status: 'available',
        since: now,
        source: 'runtime',
        updatedAt: now,
      })
      // Sends already holding the old provider finish on it; close only after they had time to.
      if (old?.close) setTimeout(() => void old.close?.().catch(() => undefined), 35_000).unref?.()
      changed(name)
      opts.onLocalChange?.(name)
      return this.view(name)
    },

    async setEnabled(name: string, enabled: boolean) {
      const s = this.get(name)
      if (s.source === 'plugin') throw providedElsewhere(name)
      const now = Date.now()
      await db.run(
        `INSERT INTO notify_channels (name, type, config, enabled, updated_at) VALUES (?, NULL, NULL, ?, ?)
         ON CONFLICT (name) DO UPDATE SET enabled = excluded.enabled, updated_at = excluded.updated_at`,
        [name, enabled ? 1 : 0, now],
      )
      // The slot as it is now: a sync may have replaced it while the write waited on the store.
      const cur = slots.get(name) ?? s
      if (cur.enabled !== enabled) cur.since = now
      cur.enabled = enabled
      cur.updatedAt = now
      changed(name)
      opts.onLocalChange?.(name)
      return { name, enabled }
    },

    list() {
      return [...slots.values()].sort((a, b) => a.name.localeCompare(b.name))
    },
  }
}
export type ChannelManager = ReturnType<typeof channelManager>

const providedElsewhere = (name: string) =>
  new Conflict(`channel '${name}' is provided by another plugin and configured there, not through /config`)

import { Type as T, type TSchema } from '@sinclair/typebox'
import { Invalid, invalidField } from '../../core/http'
import { type ProviderDefinition, type ProviderRegistry, loadProviderModule } from '../../core/plugin'
import { maskSecrets, maskValue, unmaskSecrets } from '../../core/secrets'
import type { ChannelConfig } from './schema'

/**
 * The provider a channel's `type` names: a registered one, else the one its `module` file
 * provides (registered then). Unknown types and files of another type are refused naming the field.
 */
export async function providerDefinition(
  registry: ProviderRegistry,
  type: string,
  module: string | undefined,
  field: string,
): Promise<ProviderDefinition> {
  let def = registry.get(type)
  if (!def && module) {
    const loaded = await loadProviderModule(module).catch((e: Error) => {
      throw invalidField(`${field}.module`, e.message)
    })
    if (loaded.type !== type)
      throw invalidField(`${field}.module`, `'${module}' provides type '${loaded.type}', not '${type}'`)
    if (!registry.get(type)) registry.register(loaded)
    def = loaded
  }
  if (!def)
    throw invalidField(
      `${field}.type`,
      `unknown provider type '${type}'; known: ${registry.list().join(', ')}`,
    )
  return def
}

/**
 * The setting a provider's `create` refused, as a path under the channel's `config`: a provider
 * names it with `invalidField('headers.Host', ...)`; '' for any other error.
 */
export function refusedSetting(e: unknown): string {
  const at = e instanceof Invalid ? (e.details as { field?: unknown } | undefined)?.field : undefined
  return typeof at === 'string' ? `.${at}` : ''
}

/** A whole top-level value `$NAME` (not `${NAME}`) names an environment variable. */
export const ENV_REF = /^\$([A-Za-z_][A-Za-z0-9_]*)$/

/**
 * Spec 2's `$VAR` expansion of a provider's top-level settings. `allowed` says which variables
 * may be named: every one for the YAML, only the operator's `api_env` list for API input; any
 * other name is refused naming the field, and no message carries a variable's value.
 */
export function expandEnv(
  settings: Record<string, unknown>,
  env: Record<string, string | undefined>,
  allowed: ((name: string, key: string) => boolean) | 'all',
  field: string,
): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(settings)) {
    const ref = typeof v === 'string' ? ENV_REF.exec(v) : null
    if (!ref) {
      out[k] = v
      continue
    }
    if (allowed !== 'all' && !allowed(ref[1], k))
      throw invalidField(
        `${field}.config.${k}`,
        `'$${ref[1]}' is not a variable the API may name (the operator lists those in plugins.notify.api_env)`,
      )
    out[k] = env[ref[1]] ?? ''
  }
  return out
}

/**
 * How channel settings read and how a write that sends them back is taken: what the provider's
 * schema marks secret is masked (and, for schemas that mark nothing, the names the log masks),
 * whatever the value looks like. One exception, decided by the provider and the place, not the
 * value: a top-level setting of a provider that expands variables (`expandEnv`) written `$NAME`
 * is a reference, which notify replaces by the variable before the provider sees it; it holds
 * no secret and reads as written.
 */
export function channelMasking(registry: ProviderRegistry, sensitiveNames: readonly string[]) {
  const sensitive = new Set(sensitiveNames.map((s) => s.toLowerCase()))
  const schemaOf = (type: string) => (registry.get(type)?.config ?? T.Object({})) as TSchema

  /** `masked` with every primitive under a name the log masks masked too (from the raw value). */
  function byName(raw: unknown, masked: unknown): unknown {
    if (!raw || typeof raw !== 'object' || !masked || typeof masked !== 'object') return masked
    const m = masked as Record<string, unknown>
    const out: Record<string, unknown> | unknown[] = Array.isArray(masked) ? [...masked] : { ...m }
    for (const [k, v] of Object.entries(raw)) {
      const primitive = v === null || typeof v !== 'object'
      ;(out as Record<string, unknown>)[k] =
        sensitive.has(k.toLowerCase()) && primitive ? maskValue(v) : byName(v, m[k])
    }
    return out
  }

  return {
    /** Settings as a read shows them. */
    mask(type: string, value: Record<string, unknown>): Record<string, unknown> {
      const out = byName(value, maskSecrets(schemaOf(type), value)) as Record<string, unknown>
      if (registry.get(type)?.expandEnv)
        for (const [k, v] of Object.entries(value)) if (typeof v === 'string' && ENV_REF.test(v)) out[k] = v
      return out
    },

    /**
     * A secret sent back as its masked read keeps the stored one (GET then PUT round-trips),
     * only while its destination is unchanged (else 400 "enter the secret again").
     */
    unmask(type: string, next: Record<string, unknown>, prev: Record<string, unknown> | undefined) {
      const kept = unmaskSecrets(schemaOf(type), next, prev, 'body.config') as Record<string, unknown>
      const p = prev ?? {}
      // Names the log masks: the same round trip, for schemas that mark nothing.
      for (const [k, v] of Object.entries(kept))
        if (
          sensitive.has(k.toLowerCase()) &&
          typeof v === 'string' &&
          p[k] !== undefined &&
          v === maskValue(p[k])
        )
          kept[k] = p[k]
      return kept
    },
  }
}

const RESERVED = new Set(['type', 'module', 'enabled'])

/** A YAML channel's own keys (type, module, enabled) and the provider's settings beside them. */
export function splitConfig(c: ChannelConfig): {
  type: string
  module?: string
  enabled?: boolean
  settings: Record<string, unknown>
} {
  const settings: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(c)) if (!RESERVED.has(k)) settings[k] = v
  return { type: c.type, module: c.module, enabled: c.enabled, settings }
}

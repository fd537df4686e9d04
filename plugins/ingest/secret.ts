import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Elysia } from 'elysia'
import { privateDir, tighten, writePrivate } from '../../core/files'
import { ok } from '../../core/http'
import type { PluginContext } from '../../core/plugin'

/** The file of the data directory holding the generated signing secret (0600, like jwt-secret). */
export const SECRET_FILE = 'ingest-signing-secret'

/**
 * The shared signing secret: the configured one (INGEST_SIGNING_SECRET), else, unless
 * `generate_secret` is off or only per-game secrets are configured, one generated on first start
 * into the data directory and kept there, so the quick start reaches ingestion. Several instances
 * behind a balancer configure theirs (each data directory would otherwise hold its own).
 */
export function signingSecret(
  config: { signing_secret: string; generate_secret: boolean; game_secrets: Record<string, string> },
  dataDir: string,
): { secret: string; source: 'configured' | 'generated' | 'none' } {
  if (config.signing_secret) return { secret: config.signing_secret, source: 'configured' }
  if (!config.generate_secret || Object.keys(config.game_secrets).length)
    return { secret: '', source: 'none' }
  privateDir(dataDir)
  const path = join(dataDir, SECRET_FILE)
  if (existsSync(path)) {
    tighten(path)
    return { secret: readFileSync(path, 'utf8').trim(), source: 'generated' }
  }
  const secret = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64url')
  writePrivate(path, secret)
  return { secret, source: 'generated' }
}

/** GET /api/v1/ingest/secret: the shared signing secret, for admins and developers (apikeys:read). */
export function secretRoutes(
  guard: PluginContext<unknown>['guard'],
  current: { secret: string; source: 'configured' | 'generated' | 'none' },
) {
  return new Elysia({ name: 'liveops.ingest.secret' }).use(guard).get(
    '/api/v1/ingest/secret',
    () =>
      ok({
        secret: current.secret || null,
        source: current.source,
        headers: ['X-Timestamp', 'X-Nonce', 'X-Signature'],
      }),
    {
      permission: 'apikeys:read',
      detail: {
        tags: ['ingest'],
        summary: 'The ingest signing secret (admins and developers): what the SDK signs events with',
        description:
          'source: configured (INGEST_SIGNING_SECRET), generated (made on first start, kept in data_dir/ingest-signing-secret, 0600) ' +
          'or none (secret null: ingestion answers 403 ingest_disabled; per-game secrets are not shown here).',
      },
    },
  )
}

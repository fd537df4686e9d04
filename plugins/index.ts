import type { PluginManifest } from '../core/plugin'
import agents from './agents'
import analytics from './analytics'
import audit from './audit'
import backups from './backups'
import certificates from './certificates'
import consolePlugin from './console'
import experiments from './experiments'
import games from './games'
import ingest from './ingest'
import ml from './ml'
import notify from './notify'
import opsAlerts from './ops-alerts'
import rateLimits from './rate-limits'
import rosters from './rosters'
import rules from './rules'
import site from './site'
import smtpProvider from './smtp-provider'
import webhookProvider from './webhook-provider'

/**
 * Every plugin, by the name used under `plugins:` in the YAML. Static imports only: the
 * compiled binary embeds exactly what is imported here.
 */
export const plugins: Record<string, PluginManifest> = {
  games,
  experiments,
  ingest,
  analytics,
  ml,
  notify,
  agents,
  rules,
  rosters,
  audit,
  'rate-limits': rateLimits,
  site,
  'ops-alerts': opsAlerts,
  'webhook-provider': webhookProvider,
  'smtp-provider': smtpProvider,
  certificates,
  backups,
  console: consolePlugin,
} as Record<string, PluginManifest>

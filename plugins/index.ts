import type { PluginManifest } from '../core/plugin'
import games from './games'

/**
 * Every plugin, by the name used under `plugins:` in the YAML. Static imports only: the
 * compiled binary embeds exactly what is imported here.
 */
export const plugins: Record<string, PluginManifest> = {
  games,
} as Record<string, PluginManifest>

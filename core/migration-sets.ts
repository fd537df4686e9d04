import { coreMigrations } from './auth/migrations'
import type { MigrationSet } from './db'
import type { PluginManifest } from './plugin'
import { scheduleMigrations } from './schedule-store'

/** Every migration an app of these plugins applies, core's first. */
export function migrationSets(ordered: readonly PluginManifest[]): MigrationSet[] {
  const sets: MigrationSet[] = [
    { plugin: 'core', migrations: coreMigrations },
    { plugin: 'core.schedule', migrations: scheduleMigrations },
  ]
  for (const p of ordered) if (p.migrations?.length) sets.push({ plugin: p.name, migrations: p.migrations })
  return sets
}

import type { Migration } from '../../core/db'
import m001 from './migrations/001_take_rollups.sql' with { type: 'text' }

export const migrations: Migration[] = [{ id: 1, name: 'take_rollups', sql: m001 }]

// What an instance is before it serves: its name, its JWT secret, the bootstrap admin.
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { AuthService } from './auth/service'
import type { Db } from './db'
import { privateDir, tighten, writePrivate } from './files'
import type { Logger } from './log'

/**
 * A value kept in a file of the data directory: read when there, else made once and written.
 * The directory is made 0700 and the file 0600 (one an older version wrote looser is tightened).
 */
function keptInDataDir(dataDir: string, file: string, make: () => string): string {
  privateDir(dataDir)
  const path = join(dataDir, file)
  if (existsSync(path)) {
    tighten(path)
    return readFileSync(path, 'utf8').trim()
  }
  const value = make()
  writePrivate(path, value)
  return value
}

/**
 * This instance's name among those sharing a store: `instance_id` of the YAML, else one made
 * once into the data directory (a restart keeps it, so the instance still owns what it made).
 */
export function instanceId(configured: string, dataDir: string): string {
  if (configured) return configured
  return keptInDataDir(dataDir, 'instance-id', () => `instance-${Bun.randomUUIDv7().slice(-12)}`)
}

/** The configured JWT secret, or the one generated once into the data directory. */
export function jwtSecret(configured: string, dataDir: string): string {
  if (configured) return configured
  return keptInDataDir(dataDir, 'jwt-secret', () =>
    Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64url'),
  )
}

/**
 * The bootstrap admin's password and its Argon2id hash, which takes ~200 ms of a core. Bun hashes
 * on another thread, so the hash starts as soon as the store shows no user (before the
 * migrations) and runs while the plugins set up; the admin row is written before createApp
 * returns, so nothing listens without it.
 */
export interface PendingAdmin {
  password: string
  /** Set when no password was configured. */
  generated?: string
  hash: Promise<string>
}

export function hashAdminPassword(
  configured: string,
  hashPassword: (password: string) => Promise<string> = (p) => Bun.password.hash(p),
): PendingAdmin {
  const generated = configured
    ? undefined
    : Buffer.from(crypto.getRandomValues(new Uint8Array(12))).toString('base64url')
  const password = configured || generated!
  const hash = hashPassword(password)
  // Awaited, and a failure met, only if the admin is created.
  hash.catch(() => {})
  return { password, generated, hash }
}

/** Whether the store has no user yet, asked before migrating: a fresh store has no `users` table. */
export async function hasNoUser(db: Db): Promise<boolean> {
  try {
    return !(await db.get('SELECT 1 AS one FROM users LIMIT 1'))
  } catch {
    return true
  }
}

/** Creates the bootstrap admin when the store has no user; answers the generated password, if any. */
export async function bootstrapAdmin(
  auth: AuthService,
  email: string,
  pending: PendingAdmin | undefined,
  configured: string,
  log: Logger,
  hashPassword?: (password: string) => Promise<string>,
): Promise<string | undefined> {
  if ((await auth.countUsers()) > 0) return undefined
  const { password, generated, hash } = pending ?? hashAdminPassword(configured, hashPassword)
  await auth.createUser({ email, username: 'admin', name: 'Administrator', password, roles: ['admin'] }, hash)
  if (generated)
    log.warn(`bootstrap admin created: ${email} with generated password ${generated} (shown once)`)
  else log.info(`bootstrap admin created: ${email}`)
  return generated
}

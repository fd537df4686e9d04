#!/usr/bin/env bun
/**
 * Demo data for a fresh installation, written through the real routes of the configured app
 * (same config resolution as the server: --config, LIVEOPS_CONFIG, config/liveops.yaml).
 *
 *   ADMIN_PASSWORD=... bun scripts/seed.ts [--config FILE]
 *
 * Creates one user per role (password `demo-password`), three games (one LIVE) and an SDK API
 * key for each game's prod environment; prints the keys once. Running it again changes nothing
 * that exists: users, games and keys are looked up first (a key is shown only when created).
 */
import { readFileSync } from 'node:fs'
import { createApp } from '../core/app'
import { ROLES } from '../core/auth/roles'
import { loadConfig } from '../core/config'
import { plugins } from '../plugins'
import { GAME_STATUSES } from '../plugins/games/types'

const i = process.argv.indexOf('--config')
const file = i >= 0 ? process.argv[i + 1] : (process.env.LIVEOPS_CONFIG ?? 'config/liveops.yaml')
const config = loadConfig(readFileSync(file, 'utf8'), plugins)
// Before anything is created: without the password the server would bootstrap an admin with a
// generated one, and seed could not log in as it.
if (!config.core.admin.password) {
  console.error(
    'seed logs in as the admin and needs its password: run it as `ADMIN_PASSWORD=... bun run seed`\n' +
      '(or set admin.password in the config). On a new data directory that password becomes the\n' +
      "admin's; on an existing one, use the password you log in with. Nothing was created.",
  )
  process.exit(2)
}
const built = await createApp(config, { plugins })
const admin = await built.auth
  .checkPassword('email', config.core.admin.email, config.core.admin.password)
  .catch(() => undefined)
const token = admin ? built.auth.accessToken(admin) : undefined
if (!token) {
  console.error(
    `seed could not log in as ${config.core.admin.email}: ADMIN_PASSWORD is not that admin's password`,
  )
  await built.stop()
  process.exit(2)
}

async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await built.app.handle(
    new Request(`http://localhost${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    }),
  )
  const text = await res.text()
  if (res.status >= 400 && res.status !== 409) throw new Error(`${method} ${path}: ${res.status} ${text}`)
  return (text ? JSON.parse(text) : undefined) as T
}

for (const role of ROLES.filter((r) => r !== 'admin'))
  await call('POST', '/api/users', {
    email: `${role}@demo.local`,
    username: `demo-${role}`,
    password: 'demo-password',
    roles: [role],
  })

const demo = [
  {
    name: 'Dragon Tales',
    genre: 'RPG',
    platforms: ['ANDROID', 'IOS'],
    timezone: 'Europe/Berlin',
    defaultCurrency: 'EUR',
    live: true,
  },
  {
    name: 'Block Drop',
    genre: 'PUZZLE',
    platforms: ['WEB'],
    timezone: 'America/New_York',
    defaultCurrency: 'USD',
    live: false,
  },
  {
    name: 'Arena Legends',
    genre: 'MOBA',
    platforms: ['ANDROID', 'IOS', 'WEB'],
    timezone: 'Asia/Tokyo',
    defaultCurrency: 'JPY',
    live: false,
  },
]
/** The demo game of this name, whatever its status now (each status is asked for explicitly). */
async function existing(name: string, genre: string): Promise<{ id: string; status: string } | undefined> {
  for (const status of GAME_STATUSES) {
    const page = await call<{ items: Array<{ id: string; name: string; status: string }> }>(
      'GET',
      `/api/games?genre=${genre}&status=${status}&size=100`,
    )
    const hit = page.items.find((g) => g.name === name)
    if (hit) return hit
  }
  return undefined
}

for (const { live, ...game } of demo) {
  const found = await existing(game.name, game.genre)
  const g = found ?? (await call<{ id: string; status: string }>('POST', '/api/games', game))
  if (live && g.status !== 'LIVE') await call('POST', `/api/games/${g.id}/publish`)
  const keyName = `${game.name} SDK`
  const keys = await call<Array<{ name: string; prefix: string; revokedAt?: string | null }>>(
    'GET',
    `/api/api-keys?gameId=${g.id}&environment=prod`,
  )
  const kept = keys.find((k) => k.name === keyName && !k.revokedAt)
  const line = kept
    ? `prod API key ${kept.prefix}... (created by an earlier run, not shown again)`
    : `prod API key ${(await call<{ key: string }>('POST', '/api/api-keys', { name: keyName, gameId: g.id, environment: 'prod' })).key}`
  console.log(`${game.name.padEnd(14)} game ${g.id}${found ? ' (existed)' : ''}  ${line}`)
}
console.log('users: <role>@demo.local / demo-password for operator, analyst, developer, viewer')
// Everything a plugin started ends in its stop hook, so the process exits here on its own (the
// seed test fails if a timer or socket outlives stop()).
await built.stop()

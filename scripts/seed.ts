#!/usr/bin/env bun
/**
 * Demo data for a fresh installation, written through the real routes of the configured app
 * (same config resolution as the server: --config, LIVEOPS_CONFIG, config/liveops.yaml).
 *
 *   bun scripts/seed.ts [--config FILE]
 *
 * Creates one user per role (password `demo-password`), three games (one LIVE) and an SDK API
 * key for each game's prod environment; prints the keys once.
 */
import { readFileSync } from 'node:fs'
import { createApp } from '../core/app'
import { ROLES } from '../core/auth/roles'
import { loadConfig } from '../core/config'
import { plugins } from '../plugins'

const i = process.argv.indexOf('--config')
const file = i >= 0 ? process.argv[i + 1] : (process.env.LIVEOPS_CONFIG ?? 'config/liveops.yaml')
const config = loadConfig(readFileSync(file, 'utf8'), plugins)
const built = await createApp(config, { plugins })
const admin = await built.auth
  .checkPassword(
    'email',
    config.core.admin.email,
    config.core.admin.password || process.env.ADMIN_PASSWORD || '',
  )
  .catch(() => undefined)
const token = admin ? built.auth.accessToken(admin) : undefined
if (!token) {
  console.error('seed needs the admin password: set ADMIN_PASSWORD (or admin.password in the config)')
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
for (const { live, ...game } of demo) {
  const g = await call<{ id: string }>('POST', '/api/games', game)
  if (live) await call('POST', `/api/games/${g.id}/publish`)
  const key = await call<{ key: string }>('POST', '/api/api-keys', {
    name: `${game.name} SDK`,
    gameId: g.id,
    environment: 'prod',
  })
  console.log(`${game.name.padEnd(14)} game ${g.id}  prod API key ${key.key}`)
}
console.log('users: <role>@demo.local / demo-password for operator, analyst, developer, viewer')
await built.stop()

import { describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Type as T } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import { createApp, orderPlugins } from '../../core/app'
import { ConfigError, loadConfig } from '../../core/config'
import { createLogger } from '../../core/log'
import { type PluginManifest, definePlugin } from '../../core/plugin'
import { startServer } from '../process'

const quiet = createLogger(
  { level: 'error', format: 'json', max_size: 1, max_backups: 0, max_age: 0, sensitive_fields: [] },
  () => undefined,
)

function fakePlugins(events: string[]) {
  const make = (name: string, dependsOn: string[] = []) =>
    definePlugin({
      name,
      dependsOn,
      config: T.Object(
        { greeting: T.String({ default: `hi from ${name}` }) },
        { additionalProperties: false },
      ),
      migrations: [{ id: 1, name: 'init', sql: `CREATE TABLE ${name}_things (id TEXT PRIMARY KEY)` }],
      setup(ctx) {
        events.push(`setup ${name}`)
        ctx.onStart(() => {
          events.push(`start ${name}`)
        })
        ctx.onStop(() => {
          events.push(`stop ${name}`)
        })
        return new Elysia({ name }).get(`/${name}`, () => ctx.config.greeting)
      },
    }) as PluginManifest
  return { alpha: make('alpha', ['beta']), beta: make('beta'), gamma: make('gamma', ['alpha']) }
}

describe('plugin composition', () => {
  test('set up in dependency order, started after all setups, stopped in reverse', async () => {
    const events: string[] = []
    const plugins = fakePlugins(events)
    const dir = mkdtempSync(join(tmpdir(), 'liveops-plugins-'))
    const config = loadConfig(
      `data_dir: ${dir}\nadmin: { password: pw-12345678 }\nplugins: { gamma: {}, alpha: { greeting: hello }, beta: {} }`,
      plugins,
      {},
    )
    const built = await createApp(config, { plugins, log: quiet })
    expect(events).toEqual([
      'setup beta',
      'setup alpha',
      'setup gamma',
      'start beta',
      'start alpha',
      'start gamma',
    ])
    expect(await (await built.app.handle(new Request('http://localhost/alpha'))).text()).toBe('hello')
    expect(await (await built.app.handle(new Request('http://localhost/beta'))).text()).toBe('hi from beta')
    expect(await built.db.all('SELECT plugin FROM liveops_migrations WHERE id = 1 ORDER BY plugin')).toEqual([
      { plugin: 'alpha' },
      { plugin: 'beta' },
      { plugin: 'core' },
      { plugin: 'core.schedule' },
      { plugin: 'gamma' },
    ])
    await built.stop()
    await built.stop()
    expect(events.slice(6)).toEqual(['stop gamma', 'stop alpha', 'stop beta'])
    rmSync(dir, { recursive: true, force: true })
  })

  test('a dependency that is not enabled, unknown, or a cycle is a startup error', () => {
    const plugins = fakePlugins([])
    expect(() => orderPlugins(['alpha'], plugins)).toThrow(
      "plugin 'alpha' depends on 'beta', which is not enabled",
    )
    expect(() => orderPlugins(['x'], plugins)).toThrow('unknown plugin')
    const cyclic = {
      a: { ...plugins.beta, name: 'a', dependsOn: ['b'] },
      b: { ...plugins.beta, name: 'b', dependsOn: ['a'] },
    }
    expect(() => orderPlugins(['a', 'b'], cyclic)).toThrow('cycle')
  })

  test('plugin settings are validated with their path', () => {
    const plugins = fakePlugins([])
    const err = (() => {
      try {
        loadConfig('plugins: { beta: { greeting: [1], extra: true } }', plugins, {})
      } catch (e) {
        return e as ConfigError
      }
    })()
    expect(err).toBeInstanceOf(ConfigError)
    expect(err!.errors.join('\n')).toContain('plugins.beta.greeting')
    expect(err!.errors.join('\n')).toContain('plugins.beta.extra')
  })
})

describe('server process', () => {
  test('bodies over server.body_limit_mb answer 413; --config selects the file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'liveops-limit-'))
    const config = join(dir, 'small.yaml')
    await Bun.write(
      config,
      `data_dir: ${dir}\nserver: { body_limit_mb: 0.01 }\nlog: { level: info }\nplugins: { games: {} }\n`,
    )
    const s = await startServer([process.execPath, 'core/main.ts', '--config', config], {
      ADMIN_PASSWORD: 'limit-password',
    })
    try {
      expect(s.output()).toContain(config)
      const big = await fetch(`${s.base}/api/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'x'.repeat(20_000), password: 'y' }),
      })
      expect(big.status).toBe(413)
      const small = await fetch(`${s.base}/api/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'admin@localhost', password: 'limit-password' }),
      })
      expect(small.status).toBe(200)
    } finally {
      s.proc.kill('SIGTERM')
      await s.proc.exited
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

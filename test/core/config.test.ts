import { describe, expect, test } from 'bun:test'
import { readFileSync, rmSync } from 'node:fs'
import { ConfigError, checkConfig, loadConfig } from '../../core/config'
import { embeddedConfig as parsedAtBuild } from '../../core/embedded-config' with { type: 'macro' }
import { plugins } from '../../plugins'

const load = (yaml: string, env: Record<string, string> = {}) => loadConfig(yaml, plugins, env)
const errorsOf = (yaml: string, env: Record<string, string> = {}) => {
  try {
    load(yaml, env)
  } catch (e) {
    if (e instanceof ConfigError) return e.errors
    throw e
  }
  throw new Error('expected a ConfigError')
}

describe('config', () => {
  test('the embedded default, parsed when bundled, is what reading config/liveops.yaml gives', () => {
    const env = { ADMIN_PASSWORD: 'embedded-pw' }
    const text = readFileSync(`${import.meta.dir}/../../config/liveops.yaml`, 'utf8')
    expect(checkConfig(parsedAtBuild(), plugins, env)).toEqual(load(text, env))
    expect(Object.keys(checkConfig(parsedAtBuild(), plugins, env).plugins)).toContain('notify')
  })

  test('defaults fill every section', () => {
    const c = load('plugins: { games: {} }')
    expect(c.core.server.port).toBe(8080)
    expect(c.core.server.host).toBe('0.0.0.0')
    expect(c.core.data_dir).toBe('./data')
    expect(c.core.rate_limit).toEqual({ requests_per_minute: 1000, burst: 100 })
    expect(c.core.telemetry.prometheus).toEqual({ enabled: false, path: '/metrics/prometheus' })
    expect(c.plugins.games).toEqual({ cache_ttl_ms: 1000 })
  })

  test('${VAR} and ${VAR:-default} expand, and numbers and booleans convert', () => {
    const yaml =
      'server: { port: "${P}", host: "${H:-127.0.0.1}" }\ndata_dir: "/srv/${NAME}/data"\ntelemetry: { prometheus: { enabled: "${PROM:-false}" } }'
    const c = load(yaml, { P: '9090', NAME: 'liveops', PROM: 'true' })
    expect(c.core.server.port).toBe(9090)
    expect(c.core.server.host).toBe('127.0.0.1')
    expect(c.core.data_dir).toBe('/srv/liveops/data')
    expect(c.core.telemetry.prometheus.enabled).toBe(true)
  })

  test('the running-contract variables win over the YAML', () => {
    const c = load('server: { port: 1 }\ndatabase: { url: "x.sqlite" }', {
      PORT: '7000',
      DATABASE_URL: 'postgres://db/liveops',
      DATA_DIR: '/var/lib/liveops',
      TELEMETRY_PROMETHEUS_ENABLED: 'true',
    })
    expect(c.core.server.port).toBe(7000)
    expect(c.core.database.url).toBe('postgres://db/liveops')
    expect(c.core.data_dir).toBe('/var/lib/liveops')
    expect(c.core.telemetry.prometheus.enabled).toBe(true)
  })

  test('WAREHOUSE_DSN (a variable of a plugin setting): unset keeps the config, set wins, set but empty is kept empty (analytics reads it as none)', () => {
    const dsn = (c: ReturnType<typeof load>) =>
      (c.plugins.analytics as { warehouse: { dsn: string } }).warehouse.dsn
    const yaml = 'plugins: { games: {}, ingest: {}, analytics: { warehouse: { dsn: embedded } } }'
    expect(dsn(load(yaml))).toBe('embedded')
    expect(dsn(load(yaml, { WAREHOUSE_DSN: '' }))).toBe('')
    expect(
      dsn(load('plugins: { games: {}, ingest: {}, analytics: {} }', { WAREHOUSE_DSN: '/tmp/wh.sqlite' })),
    ).toBe('/tmp/wh.sqlite')
  })

  test('every error is reported at once, each with its path', () => {
    const errors = errorsOf(
      'server: { port: "${MISSING}", prot: 1 }\nlog: { level: loud }\nplugins: { games: { cache_ttl_ms: -1 }, gmaes: {} }\nrate_limit: { burst: many }',
    )
    const text = errors.join('\n')
    expect(text).toContain('server.port: environment variable MISSING is not set')
    expect(text).toContain('server.prot')
    expect(text).toContain('log.level')
    expect(text).toContain('plugins.games.cache_ttl_ms')
    expect(text).toContain('rate_limit.burst')
    expect(errors.length).toBeGreaterThanOrEqual(5)
  })

  test('an unknown plugin key fails and lists the known plugins', () => {
    const errors = errorsOf('plugins: { gmaes: {} }')
    expect(errors).toHaveLength(1)
    expect(errors[0]).toContain('plugins.gmaes: unknown plugin')
    for (const name of Object.keys(plugins)) expect(errors[0]).toContain(name)
  })

  test('YAML syntax errors are reported, not thrown raw', () => {
    expect(errorsOf('server: [unclosed')[0]).toStartWith('YAML:')
  })

  test('the shipped configs are valid', async () => {
    for (const file of ['config/liveops.yaml', 'config/production.example.yaml']) {
      const text = await Bun.file(file).text()
      expect(() =>
        load(text, {
          DATABASE_URL: 'postgres://u@db/liveops',
          SMTP_PASSWORD: 'x',
          INGEST_SIGNING_SECRET: 's',
          ADMIN_TOKEN: 'admin-token-of-the-example',
        }),
      ).not.toThrow()
    }
  })

  test('a JWT secret or admin token shorter than 16 characters stops the start, its value never echoed', () => {
    const text = 'server: { port: 8080 }\n'
    let message = ''
    try {
      load(text, { JWT_SECRET: 'k', ADMIN_TOKEN: 'zq-zq-zq' })
    } catch (e) {
      message = String(e)
    }
    expect(message).toContain('auth.jwt_secret (JWT_SECRET): at least 16 characters when set, got 1')
    expect(message).toContain('auth.admin_token (ADMIN_TOKEN): at least 16 characters when set, got 8')
    expect(message).not.toContain('zq-zq')
    expect(() => load(text, { JWT_SECRET: 'a'.repeat(16), ADMIN_TOKEN: '' })).not.toThrow()
  })

  test('liveops check-config answers ok or lists every problem with exit code 2', async () => {
    const good = Bun.spawnSync([process.execPath, 'core/main.ts', 'check-config', 'config/liveops.yaml'])
    expect(good.exitCode).toBe(0)
    expect(good.stdout.toString()).toContain('ok: config/liveops.yaml')
    const bad = `${process.env.TMPDIR ?? '/tmp'}/liveops-bad-${Date.now()}.yaml`
    await Bun.write(bad, 'server: { port: nope }\nplugins: { nope: {} }\n')
    const r = Bun.spawnSync([process.execPath, 'core/main.ts', 'check-config', bad])
    rmSync(bad, { force: true })
    expect(r.exitCode).toBe(2)
    const err = r.stderr.toString()
    expect(err).toContain('server.port')
    expect(err).toContain('plugins.nope: unknown plugin')
  }, 30_000)

  test('liveops check-config says a worker or agent token under 16 characters, naming the setting, never the value', async () => {
    // The server refused both at start while check-config answered ok; the agent token had no
    // least length at all (the fleet's credential and the key of every agent key).
    const file = `${process.env.TMPDIR ?? '/tmp'}/liveops-short-${Date.now()}.yaml`
    const yaml = (worker: string, agent: string) =>
      `plugins:\n  notify: { workers: { remote: { enabled: true, token: ${worker} } } }\n  agents: { token: ${agent} }\n`
    const env = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => k !== 'AGENT_TOKEN' && k !== 'NOTIFY_WORKER_TOKEN'),
    )
    const checkConfig = async (text: string) => {
      await Bun.write(file, text)
      const r = Bun.spawnSync([process.execPath, 'core/main.ts', 'check-config', file], { env })
      rmSync(file, { force: true })
      return { code: r.exitCode, out: `${r.stdout}${r.stderr}` }
    }
    const short = await checkConfig(yaml('wk-Zq-Short-15c', 'ag-Zq-7'))
    expect(short.code).toBe(2)
    expect(short.out).toContain(
      'plugins.notify.workers.remote.token (NOTIFY_WORKER_TOKEN): at least 16 characters, got 15',
    )
    expect(short.out).toContain('plugins.agents.token (AGENT_TOKEN): at least 16 characters, got 7')
    expect(short.out).not.toContain('Zq')
    const long = await checkConfig(yaml('wk-Zq-Long-16chr', 'ag-Zq-Long-16chr'))
    expect([long.code, long.out]).toEqual([0, expect.stringContaining('ok: ')])
    // The variables count as the YAML does; empty (every worker or agent refused) is no problem.
    expect(errorsOf('plugins: { agents: {} }', { AGENT_TOKEN: 'zq' })).toEqual([
      'plugins.agents.token (AGENT_TOKEN): at least 16 characters, got 2',
    ])
    expect(() => load('plugins: { agents: { token: "" }, notify: {} }')).not.toThrow()
  }, 30_000)
})

import { existsSync, readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import pkg from '../package.json'
import { plugins } from '../plugins'
import { commands } from '../plugins/commands'
import { createApp } from './app'
import { ConfigError, type LoadedConfig, checkConfig, loadConfig } from './config'
import { storageFault } from './db/faults'
import { embeddedConfig } from './embedded-config' with { type: 'macro' }
import { privateDir, writePrivate } from './files'
import { listen } from './listen'
import { createLogger } from './log'

const USAGE = `liveops — self-hosted back end for live games

usage:
  liveops [serve] [--config FILE]     run the server (default config: $LIVEOPS_CONFIG or config/liveops.yaml,
                                      else the embedded default)
  liveops check-config FILE           validate a configuration file and list every problem
  liveops worker --server URL --token TOKEN [--id ID] [--capabilities webhook,smtp,log] [--concurrency N]
                                      run a remote notification worker (liveops worker --help)
  liveops rebuild CONSUMER [--from YYYY-MM-DD] [--config FILE]
                                      recompute an event-log consumer's results (analytics, behavior, realtime,
                                      exposures) from the raw events, beside a running server; waits until done
  liveops --version                   the version (also: liveops version)
  liveops help                        this text

exit status: 0 ok, 2 a configuration or usage problem (the message says which)`

/** The configuration file's text, or none: the embedded default. */
function readConfig(file: string | undefined): { text?: string; source: string } {
  const path = file ?? process.env.LIVEOPS_CONFIG ?? 'config/liveops.yaml'
  if (existsSync(path)) return { text: readFileSync(path, 'utf8'), source: path }
  if (file || process.env.LIVEOPS_CONFIG) {
    console.error(`config file not found: ${path}`)
    process.exit(2)
  }
  return { source: 'embedded default' }
}

function load(text: string | undefined): LoadedConfig {
  try {
    return text === undefined ? checkConfig(embeddedConfig(), plugins) : loadConfig(text, plugins)
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(e.message)
      process.exit(2)
    }
    throw e
  }
}

/** One line and exit code 2: what an operator (or systemd) needs, not a stack trace. */
function fatal(line: string): never {
  console.error(`liveops: ${line}`)
  process.exit(2)
}

/** The data directory holds the SQLite store, the generated JWT secret and backups: it must be writable. */
function checkDataDir(dir: string) {
  try {
    privateDir(dir)
    const probe = join(dir, `.write-test-${process.pid}`)
    writePrivate(probe, '')
    rmSync(probe)
  } catch (e) {
    const err = e as NodeJS.ErrnoException
    fatal(`data_dir '${dir}' is not writable (${err.code ?? 'error'}): ${err.message}`)
  }
}

const portInUse = (host: string, port: number) =>
  `port ${port} on ${host} is in use by another process: stop it, or set server.port (env PORT)`

/** A port another process holds is said in one line before anything is written (the store, secrets). */
function checkPort(host: string, port: number) {
  if (!port) return
  try {
    Bun.serve({ hostname: host, port, fetch: () => new Response() }).stop(true)
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EADDRINUSE') fatal(portInUse(host, port))
    throw e
  }
}

async function serve(file: string | undefined) {
  const { text, source } = readConfig(file)
  const config = load(text)
  const log = createLogger(config.core.log)
  const t0 = performance.now()
  checkPort(config.core.server.host, config.core.server.port)
  checkDataDir(config.core.data_dir)
  const built = await createApp(config, { plugins, log }).catch((e: unknown) => {
    const fault = storageFault(e)
    if (fault) fatal(`the store cannot be used: ${fault.cause}: ${fault.detail}`)
    throw e
  })
  built.metrics.collectDefaults()
  let server: ReturnType<typeof listen>
  try {
    server = listen(built, { port: config.core.server.port, hostname: config.core.server.host })
  } catch (e) {
    // Taken between the check and now.
    if ((e as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw e
    await built.stop()
    fatal(portInUse(config.core.server.host, config.core.server.port))
  }
  log.info(`liveops listening on http://${server.hostname}:${server.port}`, {
    config: source,
    store: built.db.dialect,
    plugins: Object.keys(config.plugins),
    duration_ms: Math.round(performance.now() - t0),
  })

  let stopping = false
  const shutdown = async (signal: string) => {
    if (stopping) return
    stopping = true
    log.info(`${signal}: draining in-flight requests`)
    await built.bus.emit('server.draining', { signal })
    const grace = config.core.server.shutdown_grace_s * 1000
    // stop(false) refuses new connections and resolves when in-flight requests finish.
    await Promise.race([server.stop(false), Bun.sleep(grace).then(() => server.stop(true))])
    await built.stop()
    log.info('stopped')
    process.exit(0)
  }
  process.on('SIGTERM', () => void shutdown('SIGTERM'))
  process.on('SIGINT', () => void shutdown('SIGINT'))
}

/** Turns off the listeners of their own that plugins open beside the HTTP server: notify's remote workers, OTLP/gRPC. */
function sidePortsOff(settings: Record<string, unknown>) {
  const at = (o: unknown, ...keys: string[]) =>
    keys.reduce<unknown>(
      (v, k) => (v && typeof v === 'object' ? (v as Record<string, unknown>)[k] : undefined),
      o,
    )
  for (const side of [at(settings, 'notify', 'workers', 'remote'), at(settings, 'ingest', 'otlp', 'grpc')])
    if (side && typeof side === 'object') (side as { enabled?: boolean }).enabled = false
}

/**
 * `liveops rebuild CONSUMER [--from DATE]`: asks for the rebuild through the store (the instance
 * holding the consumer's lease does it: a running server, else this process), then reports
 * progress until the consumer is back at the end of the log.
 */
async function rebuild(name: string | undefined, fromText: string | undefined, file: string | undefined) {
  if (!name) fatal('usage: liveops rebuild CONSUMER [--from YYYY-MM-DD] [--config FILE]')
  let from: number | undefined
  if (fromText !== undefined) {
    from = Date.parse(`${fromText}T00:00:00Z`)
    if (!/^\d{4}-\d{2}-\d{2}$/.test(fromText) || Number.isNaN(from))
      fatal(`--from: not a date YYYY-MM-DD: ${fromText}`)
  }
  const config = load(readConfig(file).text)
  // An instance of its own: a server on the same data directory keeps its lease (and its memory).
  config.core.instance_id = `rebuild-${process.pid}`
  // Nor does it open the side ports a running server holds (EADDRINUSE beside one, its use).
  sidePortsOff(config.plugins)
  const built = await createApp(config, { plugins, log: createLogger({ ...config.core.log, level: 'warn' }) })
  try {
    if (!built.events.names().includes(name))
      fatal(`no consumer '${name}' (this configuration has: ${built.events.names().join(', ') || 'none'})`)
    await built.events.rebuild(name, from).catch((e: Error) => fatal(e.message))
    console.log(`rebuild of '${name}' asked${fromText ? ` from ${fromText}` : ''}`)
    for (let last = ''; ; ) {
      await Bun.sleep(1000)
      const s = (await built.events.status()).find((c) => c.name === name)
      if (!s) break
      const line = `${s.name}: ${s.rebuilding ? 'rebuilding' : 'caught up'}, ${s.delivered} rows taken in, ${s.lagEvents} behind, on ${s.leaseOwner ?? 'no instance'}`
      if (line !== last) console.log(line)
      last = line
      if (s.lastError) console.error(`${s.name}: ${s.lastError}`)
      if (!s.rebuilding && s.lagEvents === 0) break
    }
  } finally {
    await built.stop()
  }
}

/** Runs the command `argv` names (`serve` when none). */
export async function main(argv: string[]) {
  const [cmd = 'serve', ...rest] = argv
  const flag = (name: string, args: string[]) => {
    const i = args.indexOf(name)
    return i >= 0 ? args[i + 1] : undefined
  }
  switch (cmd) {
    case 'serve':
      return serve(flag('--config', rest))
    case '--config':
      return serve(rest[0])
    case 'check-config': {
      const file = rest[0]
      if (!file) {
        console.error('usage: liveops check-config FILE')
        process.exit(2)
      }
      if (!existsSync(file)) {
        console.error(`config file not found: ${file}`)
        process.exit(2)
      }
      const config = load(readFileSync(file, 'utf8'))
      console.log(`ok: ${file} (plugins: ${Object.keys(config.plugins).join(', ') || 'none'})`)
      return
    }
    case 'rebuild':
      return rebuild(
        rest.find((a, i) => !a.startsWith('--') && !rest[i - 1]?.startsWith('--')),
        flag('--from', rest),
        flag('--config', rest),
      )
    case '--version':
    case '-v':
    case 'version':
      console.log(`liveops ${pkg.version}`)
      return
    case 'help':
    case '--help':
    case '-h':
      console.log(USAGE)
      return
    default:
      if (commands[cmd]) return commands[cmd](rest)
      console.error(`unknown command '${cmd}'\n\n${USAGE}`)
      process.exit(2)
  }
}

#!/usr/bin/env bun
/**
 * Issue 17: "the realtime stream holds 1,000 connected clients while signed ingestion keeps at
 * least 80% of its throughput without them". Against a real server process:
 *
 *   bun scripts/bench/analytics-realtime.ts [--engine=sqlite|postgres] [--seconds=20] [--warmup=10]
 *     [--clients=1000] [--connections=16] [--interval-ms=5000] [--heartbeat-ms=2500] [--rounds=2]
 *     [--idle-seconds=10]
 *
 * Signed 100-event batches of live events (the ingestion benchmark's load generator) in windows
 * without realtime clients (the baseline, measured in the same run) alternating with windows
 * with `clients` SSE streams on the same game and environment: without, with, without, with,
 * without for --rounds=2 (the machine is shared and its speed drifts; the ratio compares the
 * medians). The clients live in a child process on bare sockets. Each window also reports the
 * server's CPU per acknowledged event, and at the end the server's CPU with no ingestion is
 * measured without and with the clients: the streams' own cost, which noise moves least.
 */
import { rmSync } from 'node:fs'
import { rawStream } from '../../plugins/analytics/realtime/realtime-testing'
import { startServer } from '../../test/process'
import { shapes } from './events'
import { benchConfig, bootstrap, load, summary } from './ingest-load'
import { arg, cpuSeconds, dropPgDatabase, freshPgDatabase, median, tempDir } from './lib'

const TARGET = 0.8

if (arg('role', '') === 'clients') {
  // The child: holds the streams and reports what they saw, one JSON line every 500 ms.
  const n = Number(arg('clients', '1000'))
  const socks = Array.from({ length: n }, () =>
    rawStream(arg('base', ''), arg('path', ''), { authorization: `Bearer ${arg('token', '')}` }),
  )
  setInterval(() => {
    let ok = 0
    let snapshots = 0
    let lost = 0
    let withSnapshot = 0
    for (const s of socks) {
      if (s.state.status === 200) ok++
      if (s.state.snapshots > 0) withSnapshot++
      if (s.state.closed || s.state.error) lost++
      snapshots += s.state.snapshots
    }
    console.log(JSON.stringify({ ok, withSnapshot, snapshots, lost }))
  }, 500)
} else await main()

interface ClientsReport {
  ok: number
  withSnapshot: number
  snapshots: number
  lost: number
}

type Clients = { report: () => ClientsReport; close: () => Promise<unknown> }

/** The clients, in their own process; resolves once every stream is open and has had a snapshot. */
async function openClients(base: string, path: string, token: string, clients: number): Promise<Clients> {
  const proc = Bun.spawn(
    [
      process.execPath,
      import.meta.path,
      '--role=clients',
      `--clients=${clients}`,
      `--base=${base}`,
      `--path=${path}`,
      `--token=${token}`,
    ],
    { stdout: 'pipe', stderr: 'inherit' },
  )
  let report: ClientsReport = { ok: 0, withSnapshot: 0, snapshots: 0, lost: 0 }
  void (async () => {
    const decoder = new TextDecoder()
    let buf = ''
    const reader = proc.stdout.getReader()
    for (;;) {
      const { done, value } = await reader.read()
      if (done) return
      buf += decoder.decode(value)
      const lines = buf.split('\n')
      buf = lines.pop() ?? ''
      for (const line of lines) if (line.startsWith('{')) report = JSON.parse(line)
    }
  })()
  const close = () => {
    proc.kill()
    return proc.exited
  }
  const deadline = Date.now() + 120_000
  while (report.withSnapshot < clients) {
    if (Date.now() > deadline) {
      await close()
      throw new Error(`clients did not all connect: ${JSON.stringify(report)}`)
    }
    await Bun.sleep(250)
  }
  return { report: () => report, close }
}

async function main() {
  const engine = arg('engine', 'sqlite')
  const seconds = Number(arg('seconds', '20'))
  const warmup = Number(arg('warmup', '10'))
  const clients = Number(arg('clients', '1000'))
  const connections = Number(arg('connections', '16'))
  const intervalMs = Number(arg('interval-ms', '5000'))
  const heartbeatMs = Number(arg('heartbeat-ms', '2500'))
  const rounds = Number(arg('rounds', '2'))
  const idleSeconds = Number(arg('idle-seconds', '10'))
  const dir = tempDir('liveops-realtime-bench-')
  const config = await benchConfig(
    dir,
    `analytics: { realtime: { interval_ms: ${intervalMs}, heartbeat_ms: ${heartbeatMs}, max_clients: ${clients + 100}, max_clients_per_principal: ${clients + 100} } }, experiments: {}`,
  )
  const env: Record<string, string> = {
    ADMIN_PASSWORD: 'bench-password',
    JWT_SECRET: 'bench-jwt-secret-0001',
  }
  if (engine === 'postgres') env.DATABASE_URL = await freshPgDatabase('liveops_bench_realtime')
  const s = await startServer([process.execPath, 'core/main.ts', '--config', config], env, {
    timeoutMs: 60_000,
  })
  let child: Clients | undefined
  try {
    const { token, gameId } = await bootstrap(s.base)
    const pool = shapes(gameId)
    const window = async (secs: number) => {
      const c0 = cpuSeconds(s.proc.pid)
      const r = await load(s.base, gameId, 100, secs, connections, undefined, true, pool)
      const cpu = cpuSeconds(s.proc.pid) - c0
      return { ...summary(r), serverCpuUsPerEvent: +((cpu * 1e6) / Math.max(1, r.acked)).toFixed(2) }
    }
    /** The server's CPU share of one core over `secs` without ingestion: what holding the streams costs. */
    const idleCpu = async (secs: number) => {
      const c0 = cpuSeconds(s.proc.pid)
      await Bun.sleep(secs * 1000)
      return +((cpuSeconds(s.proc.pid) - c0) / secs).toFixed(4)
    }
    const path = `/api/v1/analytics/realtime?gameId=${gameId}&env=prod`
    await window(warmup)
    // Without, with, without, with, without: the machine's drift falls on both sides alike.
    const without: Array<Awaited<ReturnType<typeof window>>> = []
    const withClients: Array<Awaited<ReturnType<typeof window>>> = []
    const streams: Array<{ open: number; lost: number; snapshots: number }> = []
    for (let round = 0; round < rounds; round++) {
      without.push(await window(seconds))
      child = await openClients(s.base, path, token, clients)
      const atStart = child.report()
      withClients.push(await window(seconds))
      // The child reports every 500 ms: one more report covers the end of the window.
      await Bun.sleep(600)
      const atEnd = child.report()
      streams.push({ open: atEnd.ok, lost: atEnd.lost, snapshots: atEnd.snapshots - atStart.snapshots })
      await child.close()
      child = undefined
    }
    without.push(await window(seconds))
    const idleWithout = await idleCpu(idleSeconds)
    child = await openClients(s.base, path, token, clients)
    const idleWith = await idleCpu(idleSeconds)
    await child.close()
    child = undefined

    const eps = (xs: Array<{ eventsPerSec: number }>) => xs.map((x) => x.eventsPerSec)
    const baseline = median(eps(without))
    const during = median(eps(withClients))
    const ratio = +(during / baseline).toFixed(3)
    console.log(
      JSON.stringify({
        engine,
        seconds,
        connections,
        clients,
        intervalMs,
        heartbeatMs,
        withoutClients: without,
        withClients,
        medianEventsPerSec: { withoutClients: baseline, withClients: during },
        ratio,
        target: TARGET,
        meetsTarget: ratio >= TARGET,
        cpuUsPerEvent: {
          withoutClients: median(without.map((x) => x.serverCpuUsPerEvent)),
          withClients: median(withClients.map((x) => x.serverCpuUsPerEvent)),
        },
        // Server CPU (share of one core) with no ingestion: the streams' own cost.
        idleServerCpu: { withoutClients: idleWithout, withClients: idleWith, seconds: idleSeconds },
        streams,
        expectedSnapshotsPerWindow: Math.floor((clients * seconds * 1000) / intervalMs),
      }),
    )
  } finally {
    await child?.close()
    s.proc.kill('SIGTERM')
    await s.proc.exited
    rmSync(dir, { recursive: true, force: true })
    if (engine === 'postgres') await dropPgDatabase(env.DATABASE_URL)
  }
}

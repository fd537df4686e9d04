#!/usr/bin/env bun
/**
 * The compiled binary: time from exec to the first 200 from /healthz, and idle RSS. The ceiling,
 * measured in alternation with it: a bare Bun server compiled the same way (`bun build --compile`,
 * bytecode) that answers /healthz and does nothing else, so a slow hour of the shared machine
 * shows in both (`bare`).
 *
 * `--existing`: each timed start finds the data directory an untimed start left (migrations
 * applied, admin created), as a restart does; by default every start is a first one.
 *
 *   bun run build && bun scripts/bench/binary.ts [--runs=10] [--existing]
 */
import { existsSync, readFileSync, rmSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { arg, median, tempDir } from './lib'

const binary = resolve('dist/liveops')
if (!existsSync(binary)) throw new Error('build first: bun run build')
const runs = Number(arg('runs', '10'))
const existing = process.argv.includes('--existing')

const bareDir = tempDir('liveops-bin-bare-')
const bareSrc = join(bareDir, 'bare.ts')
await Bun.write(
  bareSrc,
  "Bun.serve({ port: Number(process.env.PORT), hostname: '127.0.0.1', routes: { '/healthz': Response.json({ status: 'up' }) } })\n",
)
const bareBinary = join(bareDir, 'bare')
const built = Bun.spawnSync(
  [process.execPath, 'build', '--compile', '--bytecode', bareSrc, '--outfile', bareBinary],
  {
    stdout: 'pipe',
    stderr: 'pipe',
  },
)
if (built.exitCode !== 0) throw new Error(`bare binary did not build: ${built.stderr}`)

/** One timed start in a new data directory (after an untimed one with `--existing`). */
async function once(file: string): Promise<[number, number]> {
  const dir = tempDir('liveops-bin-bench-')
  if (existing) await start(file, dir, false)
  const result = await start(file, dir, true)
  rmSync(dir, { recursive: true, force: true })
  return result
}

/** Starts `file`, times exec to the first /healthz 200, reads its RSS a second later (`timed`), stops it. */
async function start(file: string, dir: string, timed: boolean): Promise<[number, number]> {
  const port = 20000 + Math.floor(Math.random() * 20000)
  const t0 = performance.now()
  const proc = Bun.spawn([file], {
    cwd: dir,
    env: {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      DATA_DIR: join(dir, 'data'),
      ADMIN_PASSWORD: 'bench-password',
      LOG_LEVEL: 'warn',
    },
    stdout: 'ignore',
    stderr: 'ignore',
  })
  let ms = 0
  for (;;) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/healthz`)).status === 200) break
    } catch {}
    if (performance.now() - t0 > 10_000) throw new Error(`${file} did not become ready in 10 s`)
    await Bun.sleep(2)
  }
  ms = performance.now() - t0
  if (!timed) {
    proc.kill('SIGTERM')
    await proc.exited
    return [0, 0]
  }
  await Bun.sleep(1000)
  const status = readFileSync(`/proc/${proc.pid}/status`, 'utf8')
  const mb = Number(status.match(/VmRSS:\s+(\d+)/)?.[1] ?? 0) / 1024
  proc.kill('SIGTERM')
  await proc.exited
  return [ms, mb]
}

const ready: number[] = []
const rss: number[] = []
const bareReady: number[] = []
const bareRss: number[] = []
for (let i = 0; i < runs; i++) {
  const [ms, mb] = await once(binary)
  ready.push(ms)
  rss.push(mb)
  const [bms, bmb] = await once(bareBinary)
  bareReady.push(bms)
  bareRss.push(bmb)
}
rmSync(bareDir, { recursive: true, force: true })
console.log(
  JSON.stringify({
    readyMsMedian: Math.round(median(ready)),
    readyMsMax: Math.round(Math.max(...ready)),
    idleRssMbMedian: Math.round(median(rss)),
    bare: { readyMsMedian: Math.round(median(bareReady)), idleRssMbMedian: Math.round(median(bareRss)) },
    runs,
    existing,
  }),
)

#!/usr/bin/env bun
/**
 * The compiled binary: time from exec to the first 200 from /healthz, and idle RSS.
 *
 *   bun run build && bun scripts/bench/binary.ts [--runs=10]
 */
import { existsSync, readFileSync, rmSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { arg, median, tempDir } from './lib'

const binary = resolve('dist/liveops')
if (!existsSync(binary)) throw new Error('build first: bun run build')
const runs = Number(arg('runs', '10'))
const ready: number[] = []
const rss: number[] = []
for (let i = 0; i < runs; i++) {
  const dir = tempDir('liveops-bin-bench-')
  const port = 20000 + Math.floor(Math.random() * 20000)
  const t0 = performance.now()
  const proc = Bun.spawn([binary], {
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
  for (;;) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/healthz`)).status === 200) break
    } catch {}
    if (performance.now() - t0 > 10_000) throw new Error('binary did not become ready in 10 s')
    await Bun.sleep(2)
  }
  ready.push(performance.now() - t0)
  await Bun.sleep(1000)
  const status = readFileSync(`/proc/${proc.pid}/status`, 'utf8')
  rss.push(Number(status.match(/VmRSS:\s+(\d+)/)?.[1] ?? 0) / 1024)
  proc.kill('SIGTERM')
  await proc.exited
  rmSync(dir, { recursive: true, force: true })
}
console.log(
  JSON.stringify({
    readyMsMedian: Math.round(median(ready)),
    readyMsMax: Math.round(Math.max(...ready)),
    idleRssMbMedian: Math.round(median(rss)),
    runs,
  }),
)

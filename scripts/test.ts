#!/usr/bin/env bun
/**
 * Runs every test file (each runs on SQLite and, when it answers, on PostgreSQL), spread over
 * several `bun test` processes, and ends with the one line CI reads: `N passed, N failed`,
 * counted over every process; a process that crashes before its summary counts as a failure.
 *
 *   bun scripts/test.ts [FILE|DIR ...] [bun test flags ...]
 *
 * TEST_JOBS sets how many processes run at once (default: the cores, at least 2: the tests wait
 * on PostgreSQL, sockets and child servers as much as they compute). Each file's output is
 * printed whole when it ends, so files never interleave.
 */
import { availableParallelism } from 'node:os'
import { join, relative } from 'node:path'

const root = join(import.meta.dir, '..')
const args = process.argv.slice(2)
const flags = args.filter((a) => a.startsWith('-'))
const paths = args.filter((a) => !a.startsWith('-'))

/**
 * Seconds each file took in a whole three-engine run (scripts/test-durations.json, written by a
 * run with TEST_DURATIONS_OUT=that path): the longest start first, so the last minutes are not
 * one long file (the browser console's, ~440 s of 1,938 under load) with the other processes idle.
 */
const durationsFile = join(root, 'scripts', 'test-durations.json')
const durations: Record<string, number> = (await Bun.file(durationsFile).exists())
  ? await Bun.file(durationsFile).json()
  : {}

/** Test files under the given paths (default: the repository), longest first: by their recorded time, else their size. */
async function testFiles(): Promise<string[]> {
  const glob = new Bun.Glob('**/*.test.ts')
  const found = new Set<string>()
  for (const p of paths.length ? paths : ['.']) {
    if (p.endsWith('.test.ts')) {
      found.add(relative(root, join(process.cwd(), p)))
      continue
    }
    for await (const f of glob.scan({ cwd: join(process.cwd(), p) }))
      if (!f.includes('node_modules/')) found.add(relative(root, join(process.cwd(), p, f)))
  }
  // A file not recorded yet: its size as a rough cost (~1 s per 330 bytes in the recorded run).
  const cost = (f: string) => durations[f] ?? Bun.file(join(root, f)).size / 330
  return [...found].sort((a, b) => cost(b) - cost(a))
}

// bunfig.toml's [test] timeout is not applied by this Bun (checked: a 6 s test fails at 5 s), so
// the per-test limit is given here: two shared cores under a full suite make 5 s too tight.
async function runFile(file: string): Promise<{ passed: number; failed: number; output: string }> {
  const proc = Bun.spawn([process.execPath, 'test', '--timeout', '30000', ...flags, `./${file}`], {
    cwd: root,
    stdout: 'pipe',
    stderr: 'pipe',
    env: process.env,
  })
  const [out, err, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ])
  const output = out + err
  const passed = Number(err.match(/^\s*(\d+) pass$/m)?.[1] ?? 0)
  const failed = Number(err.match(/^\s*(\d+) fail$/m)?.[1] ?? 0)
  // A crash before the summary counts as a failure, never as a pass.
  return { passed, failed: code !== 0 && failed === 0 ? 1 : failed, output }
}

const files = await testFiles()
const jobs = Math.max(1, Number(process.env.TEST_JOBS) || Math.max(2, availableParallelism()))
const t0 = performance.now()
let passed = 0
let failed = 0
const failing: string[] = []
const took: Record<string, number> = {}
let next = 0
await Promise.all(
  Array.from({ length: Math.min(jobs, files.length) }, async () => {
    while (next < files.length) {
      const file = files[next++]!
      const t = performance.now()
      const r = await runFile(file)
      took[file] = Math.round((performance.now() - t) / 100) / 10
      passed += r.passed
      failed += r.failed
      if (r.failed) failing.push(file)
      process.stderr.write(`\n${file}:\n${r.output.trimEnd()}\n`)
    }
  }),
)
const seconds = ((performance.now() - t0) / 1000).toFixed(1)
console.error(`\n${files.length} files in ${seconds} s over ${jobs} processes`)
if (failing.length) console.error(`failing: ${failing.join(' ')}`)
if (process.env.TEST_DURATIONS_OUT)
  await Bun.write(
    process.env.TEST_DURATIONS_OUT,
    `${JSON.stringify(Object.fromEntries(Object.entries(took).sort((a, b) => b[1] - a[1])), null, 0)}\n`,
  )
console.log(`${passed} passed, ${failed} failed`)
process.exit(failed || !passed ? 1 : 0)

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
 *
 * A long file (TEST_SPLIT_S seconds or more in the last whole run, default 60; 0 splits none)
 * whose tests run per engine runs as one process per engine (TEST_ENGINE_PART, test/helpers.ts),
 * so its engines run side by side instead of one after the other: such a file holds no top-level
 * test or describe other than `engineFree`'s, which run in its SQLite part.
 */
import { readFileSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { join, relative } from 'node:path'
import { PURGE_DELAY } from '../core/allocator'
import { pgReachable } from '../test/pg-db'

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

/** The engines of this run, as test/helpers.ts finds them (it fails the run when one required is missing). */
async function runEngines(): Promise<string[]> {
  if (process.env.TEST_ENGINES) return process.env.TEST_ENGINES.split(',')
  const pg = process.env.CI === 'true' || process.env.REQUIRE_PG === '1' || (await pgReachable())
  const my = process.env.TEST_MYSQL === '1' || process.env.REQUIRE_MYSQL === '1'
  return ['sqlite', ...(pg ? ['postgres'] : []), ...(my ? ['mysql'] : [])]
}

const splitAt = Number(process.env.TEST_SPLIT_S ?? 60)
/** Whether a file runs as one process per engine: long, per engine, no test of no engine outside `engineFree`. */
function splits(file: string): boolean {
  if (!splitAt || (durations[file] ?? 0) < splitAt) return false
  const src = readFileSync(join(root, file), 'utf8')
  return /\b(forEachEngine|enginesFor)\(/.test(src) && !/^(describe|test)\b/m.test(src)
}

interface Job {
  file: string
  part?: string
  cost: number
}

/**
 * Test processes keep freed memory as the server does (core/allocator.ts): the suite spent a
 * third of its CPU in the kernel on page faults, and runs ~20% faster so (plugins/analytics on two
 * engines: 45 -> 37 s). The servers tests start inherit it; the tests of the replacement unset it.
 */
const testEnv = { ...process.env, [PURGE_DELAY]: process.env[PURGE_DELAY] ?? '-1' }

// bunfig.toml's [test] timeout is not applied by this Bun (checked: a 6 s test fails at 5 s), so
// the per-test limit is given here: two shared cores under a full suite make 5 s too tight.
async function runFile(job: Job): Promise<{ passed: number; failed: number; output: string }> {
  const proc = Bun.spawn([process.execPath, 'test', '--timeout', '30000', ...flags, `./${job.file}`], {
    cwd: root,
    stdout: 'pipe',
    stderr: 'pipe',
    env: job.part ? { ...testEnv, TEST_ENGINE_PART: job.part } : testEnv,
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

/**
 * What a long run's tail must show of a failure (CI's record keeps only the tail): each `(fail)`
 * line with the error lines before it, or, for a crash before any summary, the output's end.
 */
function failureLines(output: string): string {
  const lines = output.split('\n')
  const picked: string[] = []
  lines.forEach((line, i) => {
    if (!line.startsWith('(fail)')) return
    // bun prints a failed test's error and its source excerpt above its (fail) line.
    let from = i
    while (from > 0 && i - from < 25 && !/^\((pass|fail|skip)\)/.test(lines[from - 1]!)) from--
    picked.push(...lines.slice(from, i + 1))
  })
  return (picked.length ? picked : lines.slice(-30)).join('\n')
}

const files = await testFiles()
const engines = await runEngines()
const queue: Job[] = files
  .flatMap((file): Job[] => {
    const cost = durations[file] ?? Bun.file(join(root, file)).size / 330
    if (engines.length < 2 || !splits(file)) return [{ file, cost }]
    return engines.map((part) => ({ file, part, cost: cost / engines.length }))
  })
  .sort((a, b) => b.cost - a.cost)
const jobs = Math.max(1, Number(process.env.TEST_JOBS) || Math.max(2, availableParallelism()))
const t0 = performance.now()
let passed = 0
let failed = 0
const failing: string[] = []
/** Each failing process's failed tests and their errors, printed again beside the closing line. */
const failures: string[] = []
const took: Record<string, number> = {}
let next = 0
await Promise.all(
  Array.from({ length: Math.min(jobs, queue.length) }, async () => {
    while (next < queue.length) {
      const job = queue[next++]!
      const name = job.part ? `${job.file} [${job.part}]` : job.file
      const t = performance.now()
      const r = await runFile(job)
      // A split file's figure is the sum of its parts: what it would take as one process.
      took[job.file] = Math.round(((took[job.file] ?? 0) * 1000 + performance.now() - t) / 100) / 10
      passed += r.passed
      failed += r.failed
      if (r.failed) {
        failing.push(name)
        failures.push(`${name}:\n${failureLines(r.output)}`)
      }
      process.stderr.write(`\n${name}:\n${r.output.trimEnd()}\n`)
    }
  }),
)
const seconds = ((performance.now() - t0) / 1000).toFixed(1)
const split = queue.length - files.length
console.error(
  `\n${files.length} files${split ? ` (${queue.length} processes: the longest by engine)` : ''} in ${seconds} s over ${jobs} at once`,
)
if (failing.length) console.error(`\n${failures.join('\n\n')}\n\nfailing: ${failing.join(' ')}`)
if (process.env.TEST_DURATIONS_OUT)
  await Bun.write(
    process.env.TEST_DURATIONS_OUT,
    // One file a line, the longest first: a new record reads as a diff.
    `{\n${Object.entries(took)
      .sort((a, b) => b[1] - a[1])
      .map(([f, s]) => `${JSON.stringify(f)}: ${s}`)
      .join(',\n')}\n}\n`,
  )
console.log(`${passed} passed, ${failed} failed`)
process.exit(failed || !passed ? 1 : 0)

#!/usr/bin/env bun
/**
 * Builds the single binary `dist/liveops`: the server, every plugin, every migration and the
 * default configuration, compiled with Bun. `--target` cross-compiles (for example bun-linux-arm64).
 * Identifiers are not minified: Elysia reads handler parameter names to decide what to parse.
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import { sdkBundle } from './sdk-bundle'

const target = process.argv.find((a) => a.startsWith('--target='))?.slice('--target='.length)
const outfile =
  process.argv.find((a) => a.startsWith('--outfile='))?.slice('--outfile='.length) ?? 'dist/liveops'
mkdirSync('dist/sdk', { recursive: true })
const t0 = performance.now()
// Worker threads are separate entrypoints of the binary (plugins/ingest/persist/persist-thread.ts).
const workers = [
  'plugins/ingest/persist/persist-thread.worker.ts',
  'plugins/ml/training.worker.ts',
  'plugins/ml/log-thread.worker.ts',
  'plugins/backups/vacuum.worker.ts',
  'core/db/checkpoint.worker.ts',
  'plugins/ingest/store/walk.worker.ts',
  'plugins/rosters/ical.worker.ts',
  'plugins/ml/csv.worker.ts',
]
const args = [
  'build',
  'core/main.ts',
  ...workers,
  '--compile',
  '--minify-whitespace',
  '--minify-syntax',
  '--sourcemap',
  `--outfile=${outfile}`,
]
// Modules ship as JavaScriptCore bytecode made by this Bun, not source parsed at every start:
// exec to the first /healthz went from 301-312 ms to 207-210 ms (scripts/bench/binary.ts,
// 2026-11-24). A cross-compiled binary keeps source: its bytecode could not be checked here.
if (target) args.push(`--target=${target}`)
else args.push('--bytecode', '--format=esm')
const proc = Bun.spawnSync([process.execPath, ...args], { stdout: 'inherit', stderr: 'inherit' })
if (proc.exitCode !== 0) process.exit(proc.exitCode ?? 1)
const size = Bun.file(outfile).size
console.log(
  `built ${outfile} (${(size / 1024 / 1024).toFixed(1)} MB) in ${Math.round(performance.now() - t0)} ms`,
)
// The package's `liveops/sdk/browser` (the binary serves the same build at /sdk/liveops.js).
writeFileSync('dist/sdk/liveops.js', sdkBundle())

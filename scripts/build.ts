#!/usr/bin/env bun
/**
 * Builds the single binary `dist/liveops`: the server, every plugin, every migration and the
 * default configuration, compiled with Bun. `--target` cross-compiles (for example bun-linux-arm64).
 * Identifiers are not minified: Elysia reads handler parameter names to decide what to parse.
 */
import { mkdirSync } from 'node:fs'

const target = process.argv.find((a) => a.startsWith('--target='))?.slice('--target='.length)
const outfile =
  process.argv.find((a) => a.startsWith('--outfile='))?.slice('--outfile='.length) ?? 'dist/liveops'
mkdirSync('dist', { recursive: true })
const t0 = performance.now()
// Worker threads are separate entrypoints of the binary (plugins/ingest/persist-thread.ts).
const workers = ['plugins/ingest/persist-thread.worker.ts']
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
if (target) args.push(`--target=${target}`)
const proc = Bun.spawnSync([process.execPath, ...args], { stdout: 'inherit', stderr: 'inherit' })
if (proc.exitCode !== 0) process.exit(proc.exitCode ?? 1)
const size = Bun.file(outfile).size
console.log(
  `built ${outfile} (${(size / 1024 / 1024).toFixed(1)} MB) in ${Math.round(performance.now() - t0)} ms`,
)

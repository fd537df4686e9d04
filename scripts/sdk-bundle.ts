/**
 * The browser build of the SDK (`sdk/index.ts`): one ES module, target browser, minified, no
 * Node built-ins. Made by Bun's bundler through its CLI, because a macro (core/sdk-asset.ts
 * imports `sdkBundle` with `{ type: 'macro' }`) runs inside the bundler, where `Bun.build` may
 * not be called. `bun scripts/sdk-bundle.ts [outfile]` writes it (default dist/sdk/liveops.js:
 * the package's `liveops/sdk/browser`).
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'

const ENTRY = join(import.meta.dir, '../sdk/index.ts')

export function sdkBundle(): string {
  const p = Bun.spawnSync(
    [process.execPath, 'build', ENTRY, '--target=browser', '--format=esm', '--minify', '--sourcemap=none'],
    { stdout: 'pipe', stderr: 'pipe', env: { ...process.env, NO_COLOR: '1' } },
  )
  if (p.exitCode !== 0) throw new Error(`building the browser SDK failed:\n${p.stderr.toString()}`)
  const js = p.stdout.toString()
  // The SDK runs on WebCrypto and fetch alone: a Node built-in would be a polyfill or a failed import.
  if (/\bfrom\s*["']node:|\brequire\(|__require\b/.test(js))
    throw new Error('the browser SDK must not reach Node built-ins')
  return js
}

if (import.meta.main) {
  const out = process.argv[2] ?? join(import.meta.dir, '../dist/sdk/liveops.js')
  mkdirSync(dirname(out), { recursive: true })
  writeFileSync(out, sdkBundle())
  console.log(`wrote ${out}`)
}

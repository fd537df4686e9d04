#!/usr/bin/env bun
/**
 * Refreshes the console screenshots the README shows (docs/console/*.png): runs the console's
 * browser flows on SQLite with CONSOLE_SHOTS_DIR pointing at a temporary folder (every page is
 * photographed there, with the data the flows made) and copies the README's few into docs/.
 *
 *   bun scripts/console-shots.ts [--keep]     (--keep: leave every page's screenshot and say where)
 */
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** The pages the README shows: what a producer, a designer and an on-call engineer open first. */
export const README_SHOTS = ['analytics-retention', 'experiment-results', 'phone-incidents']

const dir = mkdtempSync(join(tmpdir(), 'liveops-console-shots-'))
const run = Bun.spawnSync([process.execPath, 'test', '--timeout', '120000', 'test/console/console.test.ts'], {
  env: { ...process.env, CONSOLE_SHOTS_DIR: dir, TEST_ENGINES: 'sqlite' },
  stdout: 'inherit',
  stderr: 'inherit',
})
if (run.exitCode !== 0) {
  console.error(`the console flows failed; screenshots so far in ${dir}`)
  process.exit(1)
}
mkdirSync('docs/console', { recursive: true })
for (const name of README_SHOTS)
  copyFileSync(join(dir, 'sqlite', `${name}.png`), join('docs/console', `${name}.png`))
if (process.argv.includes('--keep')) console.log(`every page: ${join(dir, 'sqlite')}`)
else rmSync(dir, { recursive: true, force: true })
console.log(`docs/console: ${README_SHOTS.join(', ')}`)

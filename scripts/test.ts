#!/usr/bin/env bun
/**
 * Runs `bun test` (every test runs on SQLite and, when it answers, on PostgreSQL) and ends with
 * the one line CI reads: `N passed, N failed`. Extra arguments go to `bun test`.
 */
// bunfig.toml's [test] timeout is not applied by this Bun (checked: a 6 s test fails at 5 s), so
// the per-test limit is given here: two shared cores under a full suite make 5 s too tight.
const proc = Bun.spawn([process.execPath, 'test', '--timeout', '30000', ...process.argv.slice(2)], {
  stdout: 'inherit',
  stderr: 'pipe',
  env: process.env,
})
let tail = ''
const decoder = new TextDecoder()
const reader = proc.stderr.getReader()
for (;;) {
  const { done, value } = await reader.read()
  if (done) break
  process.stderr.write(value)
  tail = (tail + decoder.decode(value)).slice(-4000)
}
const code = await proc.exited
const passed = Number(tail.match(/^\s*(\d+) pass$/m)?.[1] ?? 0)
const failed = Number(tail.match(/^\s*(\d+) fail$/m)?.[1] ?? 0)
// A crash before the summary counts as a failure, never as a pass.
const reportedFailed = code !== 0 && failed === 0 ? 1 : failed
console.log(`${passed} passed, ${reportedFailed} failed`)
process.exit(code !== 0 || passed === 0 ? 1 : 0)

export {}

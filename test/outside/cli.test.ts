import { afterAll, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/* Issue 15 point 9, the command line: problems are said plainly with exit status 2, never a stack trace. */
const dir = mkdtempSync(join(tmpdir(), 'liveops-cli-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const main = join(import.meta.dir, '../../core/main.ts')

async function run(...args: string[]) {
  const p = Bun.spawn([process.execPath, main, ...args], { stdout: 'pipe', stderr: 'pipe' })
  const [out, err, code] = await Promise.all([
    new Response(p.stdout).text(),
    new Response(p.stderr).text(),
    p.exited,
  ])
  return { out, err, code }
}

test('check-config on a missing file says so and exits 2, like serve', async () => {
  const missing = join(dir, 'nope.yaml')
  for (const args of [
    ['check-config', missing],
    ['serve', '--config', missing],
  ]) {
    const r = await run(...args)
    expect(r.code).toBe(2)
    expect(r.err.trim()).toBe(`config file not found: ${missing}`)
  }
})

test('a YAML syntax error keeps its line, column and the offending line', async () => {
  const file = join(dir, 'bad.yaml')
  writeFileSync(file, 'server:\n  port: 8080\n  host: [oops\nplugins: {}\n')
  const r = await run('check-config', file)
  expect(r.code).toBe(2)
  expect(r.err).toMatch(/at line \d+, column \d+:\n\n/)
  expect(r.err).toContain('host: [oops')
  expect(r.err).not.toContain('    at ')
})

test('help lists every command, worker included', async () => {
  const r = await run('help')
  expect(r.code).toBe(0)
  for (const cmd of ['[serve]', 'check-config', 'worker', 'help']) expect(r.out).toContain(`liveops ${cmd}`)
})

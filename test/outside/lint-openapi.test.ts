import { afterAll, beforeAll, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { plugins } from '../../plugins'
import { type TestApp, makeApp } from '../helpers'

/*
 * Issue 38 point 4: the OpenAPI description, as a running server serves it with every plugin on,
 * passes the two strict linters clients use, at 0 errors: `@redocly/cli lint` (its recommended
 * rules) and `@stoplight/spectral-cli lint` with the `oas` ruleset. Warnings are not errors.
 */
const BIN = join(import.meta.dir, '../../node_modules/.bin')

let a: TestApp
let dir: string
let file: string
beforeAll(async () => {
  a = await makeApp('sqlite', {
    plugins: {
      ...Object.fromEntries(Object.keys(plugins).map((n) => [n, {}])),
      ingest: { signing_secret: 'lint-secret-1234' },
    },
  })
  const served = await fetch(`${a.listen()}/v3/api-docs`)
  expect(served.status).toBe(200)
  dir = mkdtempSync(join(tmpdir(), 'liveops-lint-'))
  file = join(dir, 'openapi.json')
  writeFileSync(file, await served.text())
  writeFileSync(join(dir, '.spectral.yaml'), 'extends: ["spectral:oas"]\n')
})
afterAll(async () => {
  await a.stop()
  rmSync(dir, { recursive: true, force: true })
})

function run(cmd: string[]): { stdout: string; stderr: string } {
  const p = Bun.spawnSync(cmd, { cwd: dir, env: { ...process.env, NO_COLOR: '1', REDOCLY_TELEMETRY: 'off' } })
  return { stdout: p.stdout.toString(), stderr: p.stderr.toString() }
}

test('redocly lint: 0 errors', () => {
  const r = run([join(BIN, 'redocly'), 'lint', file, '--format=json'])
  const report = JSON.parse(r.stdout) as {
    problems: { ruleId: string; severity: string; message: string; location: { pointer: string }[] }[]
  }
  const errors = report.problems
    .filter((p) => p.severity === 'error')
    .map((p) => `${p.ruleId} at ${p.location[0]?.pointer}: ${p.message}`)
  expect(errors).toEqual([])
}, 120_000)

test('spectral lint (oas ruleset): 0 errors', () => {
  const r = run([
    join(BIN, 'spectral'),
    'lint',
    file,
    '-r',
    join(dir, '.spectral.yaml'),
    '-f',
    'json',
    '--quiet',
  ])
  const problems = JSON.parse(r.stdout || '[]') as {
    code: string
    severity: number
    message: string
    path: string[]
  }[]
  const errors = problems
    .filter((p) => p.severity === 0)
    .map((p) => `${p.code} at ${p.path.join('.')}: ${p.message}`)
  expect(errors).toEqual([])
}, 120_000)

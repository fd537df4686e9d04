import { afterAll, expect, test } from 'bun:test'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PURGE_DELAY, ownArgs } from '../../core/allocator'
import { environ, startServer } from '../process'

/**
 * core/allocator.ts: the server replaces itself, once, with a process whose allocator keeps freed
 * memory; the same pid, arguments and environment, and an operator's own setting wins.
 */
const dir = mkdtempSync(join(tmpdir(), 'liveops-allocator-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const main = join(import.meta.dir, '../../core/main.ts')

test('the arguments that start the program again: runtime flags and script, or a compiled binary and its arguments', () => {
  expect(
    ownArgs(['/usr/bin/bun', '/srv/core/main.ts', 'serve', '--config', 'x.yaml'], ['--smol'], '/usr/bin/bun'),
  ).toEqual(['/usr/bin/bun', '--smol', '/srv/core/main.ts', 'serve', '--config', 'x.yaml'])
  expect(ownArgs(['bun', '/$bunfs/root/liveops', 'serve', '--config', 'x.yaml'], [], '/opt/liveops')).toEqual(
    ['/opt/liveops', 'serve', '--config', 'x.yaml'],
  )
})

async function serveWith(env: Record<string, string>) {
  const data = mkdtempSync(join(dir, 'data-'))
  const file = join(data, 'liveops.yaml')
  writeFileSync(file, `data_dir: ${data}\nplugins: { games: {} }\n`)
  const s = await startServer(
    [process.execPath, main, 'serve', '--config', file],
    { ADMIN_PASSWORD: 'allocator-pw', ...env },
    { unset: [PURGE_DELAY] },
  )
  return { s, file }
}

test('without the setting the server replaces itself with one that has it: same pid, same arguments, and it answers', async () => {
  const { s, file } = await serveWith({ LIVEOPS_ALLOCATOR_PROBE: 'kept' })
  try {
    const env = environ(s.proc.pid)
    expect([env[PURGE_DELAY], env.LIVEOPS_ALLOCATOR_PROBE]).toEqual(['-1', 'kept'])
    const cmdline = readFileSync(`/proc/${s.proc.pid}/cmdline`, 'utf8').split('\0').filter(Boolean)
    expect(cmdline.slice(1)).toEqual([main, 'serve', '--config', file])
    expect((await fetch(`${s.base}/healthz`)).status).toBe(200)
    // One start, not two: the replaced process logged nothing before it was replaced.
    expect(s.output().match(/listening on/g)).toHaveLength(1)
  } finally {
    s.proc.kill()
    await s.proc.exited
  }
})

test("an operator's own setting is left alone", async () => {
  const { s } = await serveWith({ [PURGE_DELAY]: '10' })
  try {
    expect(environ(s.proc.pid)[PURGE_DELAY]).toBe('10')
  } finally {
    s.proc.kill()
    await s.proc.exited
  }
})

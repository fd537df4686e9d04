/** The certificates part of scripts/bench/ops.ts (`--part=certs`): check-all over loopback TLS servers. */
import { readFileSync, rmSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import tls from 'node:tls'
import { issue } from '../../plugins/certificates/testing'
import { arg, median, tempDir } from './lib'
import { admin, server } from './ops-process'

/** A P-256 certificate from openssl (node-forge signs RSA only); ECDSA is what most sites serve today. */
function ecCert() {
  const dir = tempDir('liveops-ops-ec-')
  const made = Bun.spawnSync(
    [
      'openssl',
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-days',
      '60',
      '-subj',
      '/CN=bench.localhost',
      '-addext',
      'subjectAltName=DNS:bench.localhost',
      '-keyout',
      join(dir, 'k.pem'),
      '-out',
      join(dir, 'c.pem'),
    ],
    { stderr: 'pipe' },
  )
  if (made.exitCode !== 0) throw new Error(`openssl: ${made.stderr}`)
  const cert = readFileSync(join(dir, 'c.pem'), 'utf8')
  const key = readFileSync(join(dir, 'k.pem'), 'utf8')
  rmSync(dir, { recursive: true, force: true })
  return { cert, chain: cert, key }
}

// Child mode: serve one certificate on N TLS ports and print them.
if (process.argv.includes('--tls-child')) {
  const n = Number(arg('servers', '10'))
  const c = arg('key', 'ec') === 'rsa' ? issue(['bench.localhost'], 60) : ecCert()
  const ports: number[] = []
  for (let i = 0; i < n; i++) {
    const s = tls.createServer({ cert: c.chain, key: c.key }, (socket) => socket.end())
    s.on('tlsClientError', () => undefined)
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r))
    ports.push((s.address() as AddressInfo).port)
  }
  console.log(`ports ${ports.join(',')}`)
  await new Promise(() => undefined)
}

export async function certs() {
  const count = Number(arg('certs', '1000'))
  const runs = Number(arg('runs', '3'))
  const child = Bun.spawn(
    [
      process.execPath,
      import.meta.path,
      '--tls-child',
      `--servers=${arg('servers', '10')}`,
      `--key=${arg('key', 'ec')}`,
    ],
    {
      stdout: 'pipe',
      stderr: 'inherit',
    },
  )
  const reader = child.stdout.getReader()
  let out = ''
  while (!out.includes('\n')) out += new TextDecoder().decode((await reader.read()).value)
  const ports = out.trim().split(' ')[1].split(',').map(Number)
  const dir = tempDir('liveops-ops-bench-')
  const s = await server(dir, '{ certificates: { check_interval_s: 0 } }')
  try {
    const t0 = performance.now()
    const lanes = 16
    let next = 0
    await Promise.all(
      Array.from({ length: lanes }, async () => {
        while (next < count) {
          const i = next++
          const r = await fetch(`${s.base}/api/v1/certificates`, {
            method: 'POST',
            headers: admin,
            body: JSON.stringify({
              domain: `c${String(i).padStart(4, '0')}.bench.localhost`,
              address: '127.0.0.1',
              port: ports[i % ports.length],
            }),
          })
          if (r.status !== 201) throw new Error(`register ${i}: ${r.status} ${await r.text()}`)
        }
      }),
    )
    console.log(
      `registered ${count} certificates over ${ports.length} TLS servers in ${Math.round(performance.now() - t0)} ms`,
    )
    const times: number[] = []
    for (let i = 0; i < runs; i++) {
      const t = performance.now()
      const r = await fetch(`${s.base}/api/v1/certificates/check-all`, { method: 'POST', headers: admin })
      const body = (await r.json()) as { data: { checked: number; stats: Record<string, number> } }
      times.push(performance.now() - t)
      if (body.data.checked !== count || body.data.stats.active !== count)
        throw new Error(`check-all: ${JSON.stringify(body.data)}`)
    }
    console.log(
      `check-all over ${count} certificates: median ${Math.round(median(times))} ms (runs ${times.map(Math.round).join(', ')} ms; target <= 2000 ms)`,
    )
  } finally {
    s.proc.kill()
    child.kill()
    await s.proc.exited
    rmSync(dir, { recursive: true, force: true })
  }
}

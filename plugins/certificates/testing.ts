import { generateKeyPairSync } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import tls from 'node:tls'
import forge from 'node-forge'

/*
 * Test fixtures: certificates made with node-forge (any validity window, any names, signed by a
 * test CA or by themselves) and real TLS servers on 127.0.0.1 that serve them.
 */

const DAY_MS = 86_400_000

/** One RSA key pair for every fixture: node's generator is fast, forge's pure-JS one is not. */
let shared: { privatePem: string; publicPem: string } | undefined
function keys() {
  shared ??= (() => {
    const k = generateKeyPairSync('rsa', { modulusLength: 2048 })
    return {
      privatePem: k.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
      publicPem: k.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    }
  })()
  return shared
}

export interface Issued {
  cert: string
  key: string
  /** Leaf then issuer, as a server sends it. */
  chain: string
}

let serial = 1

function build(opts: {
  cn: string
  sans: string[]
  notBefore: number
  notAfter: number
  ca?: boolean
  issuer?: { cert: forge.pki.Certificate; key: forge.pki.rsa.PrivateKey }
  keyPem?: { privatePem: string; publicPem: string }
}) {
  const k = opts.keyPem ?? keys()
  const priv = forge.pki.privateKeyFromPem(k.privatePem)
  const c = forge.pki.createCertificate()
  c.publicKey = forge.pki.publicKeyFromPem(k.publicPem)
  c.serialNumber = (0x1000 + serial++).toString(16)
  c.validity.notBefore = new Date(opts.notBefore)
  c.validity.notAfter = new Date(opts.notAfter)
  const attrs = [
    { name: 'commonName', value: opts.cn },
    { name: 'organizationName', value: 'Liveops Test' },
  ]
  c.setSubject(attrs)
  c.setIssuer(opts.issuer ? opts.issuer.cert.subject.attributes : attrs)
  const ext: object[] = [{ name: 'basicConstraints', cA: !!opts.ca }]
  if (opts.sans.length)
    ext.push({
      name: 'subjectAltName',
      altNames: opts.sans.map((s) => (/^[\d.]+$/.test(s) ? { type: 7, ip: s } : { type: 2, value: s })),
    })
  c.setExtensions(ext)
  c.sign(opts.issuer?.key ?? priv, forge.md.sha256.create())
  return { forgeCert: c, forgeKey: priv, pem: forge.pki.certificateToPem(c), keyPem: k.privatePem }
}

let ca: ReturnType<typeof build> | undefined
function testCa() {
  const now = Date.now()
  ca ??= build({
    cn: 'Liveops Test Root CA',
    sans: [],
    notBefore: now - 30 * DAY_MS,
    notAfter: now + 3650 * DAY_MS,
    ca: true,
  })
  return ca
}

/**
 * A certificate for `names` (first is the CN) valid from `fromDays` to `toDays` around now,
 * signed by the test CA unless `selfSigned`.
 */
export function issue(
  names: string[],
  toDays: number,
  opts: { fromDays?: number; selfSigned?: boolean } = {},
): Issued {
  const now = Date.now()
  const issuer = opts.selfSigned ? undefined : testCa()
  const leaf = build({
    cn: names[0],
    sans: names,
    notBefore: now + (opts.fromDays ?? -10) * DAY_MS,
    notAfter: now + toDays * DAY_MS,
    issuer: issuer ? { cert: issuer.forgeCert, key: issuer.forgeKey } : undefined,
  })
  return { cert: leaf.pem, key: leaf.keyPem, chain: issuer ? `${leaf.pem}${issuer.pem}` : leaf.pem }
}

/** A private key that belongs to no fixture certificate. */
export function otherKey(): string {
  return generateKeyPairSync('rsa', { modulusLength: 2048 })
    .privateKey.export({ type: 'pkcs8', format: 'pem' })
    .toString()
}

export interface TlsServer {
  port: number
  /** Serves another certificate from the next handshake on (a renewal). */
  serve(c: Issued): void
  close(): Promise<void>
}

/** A TLS server on 127.0.0.1 that completes handshakes and closes the connection. */
export async function tlsServer(c: Issued): Promise<TlsServer> {
  const server = tls.createServer({ cert: c.chain, key: c.key }, (socket) => socket.end())
  server.on('tlsClientError', () => undefined)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as AddressInfo).port,
    serve: (next) => server.setSecureContext({ cert: next.chain, key: next.key }),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}

/** A TCP port that accepts connections and never answers: a handshake that times out. */
export async function silentServer(): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<import('node:net').Socket>()
  const { createServer } = await import('node:net')
  const server = createServer((s) => {
    sockets.add(s)
    s.on('error', () => undefined)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      }),
  }
}

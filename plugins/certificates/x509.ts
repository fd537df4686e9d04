import { X509Certificate, createPrivateKey } from 'node:crypto'
import { isIP } from 'node:net'
import tls from 'node:tls'
import { NO_ANSWER, type Outbound, OutboundRefused } from '../../core/outbound'

/*
 * X.509 is read with the runtime's own parser (node:crypto X509Certificate, OpenSSL/BoringSSL
 * underneath). node-forge was the first choice, but its certificate parser refuses every key that
 * is not RSA ("OID is not RSA"), and ECDSA certificates are what many CAs issue today.
 */

const DAY_MS = 86_400_000

export type CertStatus = 'active' | 'expiring' | 'expired' | 'unknown'

/** What one certificate says about itself. */
export interface CertInfo {
  subject: string
  issuer: string
  commonName?: string
  sans: string[]
  serialNumber: string
  fingerprint256: string
  /** Public key algorithm and size, for example `RSA-2048` or `EC-prime256v1`. */
  algorithm: string
  validFrom: number
  validTo: number
  selfSigned: boolean
  ca: boolean
}

const BEGIN = '-----BEGIN CERTIFICATE-----'
const END = '-----END CERTIFICATE-----'
/** Certificates one PEM text may hold: a leaf and its chain (real chains have 2-4). */
export const MAX_CHAIN = 16

/**
 * The certificate blocks of a PEM text, each from a BEGIN line to the END after it, in one pass
 * (a lazy regular expression over a text of 9,709 BEGIN lines and no END took 2 s, the event
 * loop held; a stored one made every daily check-all hold it again). Undefined past MAX_CHAIN.
 */
function blocksOf(text: string): string[] | undefined {
  const out: string[] = []
  for (let at = text.indexOf(BEGIN); at >= 0; ) {
    const end = text.indexOf(END, at + BEGIN.length + 1)
    if (end < 0) break
    if (out.length === MAX_CHAIN) return undefined
    out.push(text.slice(at, end + END.length))
    at = text.indexOf(BEGIN, end + END.length)
  }
  return out
}

/** One line per attribute in node's rendering (`CN=a\nO=b`) becomes the usual `CN=a, O=b`. */
const dn = (s: string) => s.split('\n').filter(Boolean).join(', ')

function describe(x: X509Certificate): CertInfo {
  const key = x.publicKey
  const details = key.asymmetricKeyDetails ?? {}
  const size = details.modulusLength ?? details.namedCurve
  const cn = /(?:^|\n)CN=([^\n]*)/.exec(x.subject)?.[1]
  return {
    subject: dn(x.subject),
    issuer: dn(x.issuer),
    commonName: cn,
    sans: (x.subjectAltName ?? '')
      .split(', ')
      .filter(Boolean)
      .map((s) => s.replace(/^(DNS|IP Address):/, '')),
    serialNumber: x.serialNumber,
    fingerprint256: x.fingerprint256,
    algorithm: `${(key.asymmetricKeyType ?? 'unknown').toUpperCase()}${size ? `-${size}` : ''}`,
    validFrom: new Date(x.validFrom).getTime(),
    validTo: new Date(x.validTo).getTime(),
    selfSigned: x.subject === x.issuer && x.checkIssued(x),
    ca: x.ca,
  }
}

export type Parsed =
  | { ok: true; info: CertInfo; chain: CertInfo[]; pem: string; leaf: X509Certificate }
  | { ok: false; error: string }

/**
 * Reads a PEM text: the first certificate is the leaf, the others its chain. Never throws: a
 * text that is not a certificate answers the parser's reason, which the record keeps.
 */
export function parsePem(text: string): Parsed {
  const blocks = blocksOf(text)
  if (!blocks) return { ok: false, error: `more than ${MAX_CHAIN} certificates in one PEM text` }
  if (!blocks.length)
    return { ok: false, error: 'no PEM certificate block (-----BEGIN CERTIFICATE-----) found' }
  try {
    const [leaf, ...rest] = blocks.map((b) => new X509Certificate(b))
    return { ok: true, info: describe(leaf), chain: rest.map(describe), pem: blocks.join('\n'), leaf }
  } catch (e) {
    return { ok: false, error: `certificate does not parse: ${(e as Error).message}` }
  }
}

/** Why a private key cannot be kept beside `pem`, or undefined when it matches. */
export function keyMismatch(pem: string, keyPem: string): string | undefined {
  let key: ReturnType<typeof createPrivateKey>
  try {
    key = createPrivateKey(keyPem)
  } catch (e) {
    return `not a readable private key: ${(e as Error).message}`
  }
  const parsed = parsePem(pem)
  // An unreadable certificate is kept as status unknown; there is nothing to match the key with.
  if (!parsed.ok) return undefined
  return parsed.leaf.checkPrivateKey(key) ? undefined : 'does not match the certificate public key'
}

/** Spec 3 section 3: expired past expiry, expiring inside the threshold, else active. */
export function statusOf(validTo: number | undefined, thresholdDays: number, now = Date.now()): CertStatus {
  if (validTo === undefined) return 'unknown'
  if (validTo <= now) return 'expired'
  return validTo - now <= thresholdDays * DAY_MS ? 'expiring' : 'active'
}

/** Whole days left, rounded toward zero; negative once expired by a day or more. */
export function daysLeft(validTo: number, now = Date.now()): number {
  return Math.trunc((validTo - now) / DAY_MS) || 0
}

export interface ProbeResult {
  /** The leaf, then the chain the server sent, as PEM. */
  pem: string
  info: CertInfo
  chain: CertInfo[]
  protocol: string | null
  /** Whether the chain verifies against the system roots (the name is checked apart). */
  authorized: boolean
  authorizationError?: string
  /** Whether the leaf covers the domain asked for (SANs, then CN). */
  hostnameMatches: boolean
}

export class ProbeError extends Error {}

const toPem = (der: Buffer) =>
  `-----BEGIN CERTIFICATE-----\n${der
    .toString('base64')
    .match(/.{1,64}/g)!
    .join('\n')}\n-----END CERTIFICATE-----`

/**
 * A live TLS handshake with `domain` (SNI and name check) at `address` (default the domain),
 * through the outbound policy: the target is resolved and checked first (a refused one throws
 * OutboundRefused at once) and the connection goes to the checked address. Every failure to get
 * a handshake reads the same (NO_ANSWER), whether the port was closed, silent or reset.
 * The handshake accepts any certificate: an expired or self-signed one is exactly what the
 * ledger needs to see, so trust is reported, not enforced.
 */
export async function probe(
  outbound: Outbound,
  domain: string,
  port: number,
  timeoutMs: number,
  address = domain,
): Promise<ProbeResult> {
  // The caller's text in the answer: an address that is no plain host name is quoted (a line break
  // in `domain-info?address=` had reached the message as it was).
  const target = `${/^[A-Za-z0-9_.:[\]-]+$/.test(address) ? address : JSON.stringify(address)}:${port}`
  let checked: string
  try {
    checked = await outbound.address(address)
  } catch (e) {
    if (e instanceof OutboundRefused) throw e
    throw new ProbeError(`${target}: ${NO_ANSWER}`)
  }
  return new Promise((resolve, reject) => {
    let done = false
    const finish = (fn: () => void) => {
      if (done) return
      done = true
      clearTimeout(timer)
      try {
        fn()
      } finally {
        socket.destroy()
      }
    }
    const socket = tls.connect({
      host: checked,
      port,
      // SNI takes a name, never an address.
      servername: isIP(domain) ? undefined : domain,
      rejectUnauthorized: false,
    })
    const noAnswer = () => finish(() => reject(new ProbeError(`${target}: ${NO_ANSWER}`)))
    const timer = setTimeout(noAnswer, timeoutMs)
    socket.once('error', noAnswer)
    socket.once('secureConnect', () =>
      finish(() => {
        const peer = socket.getPeerCertificate(true)
        if (!peer?.raw) return reject(new ProbeError(`${target} sent no certificate`))
        const ders: Buffer[] = []
        const seen = new Set<string>()
        for (let c: tls.DetailedPeerCertificate | undefined = peer; c?.raw; c = c.issuerCertificate) {
          if (seen.has(c.fingerprint256)) break
          seen.add(c.fingerprint256)
          ders.push(c.raw)
        }
        const parsed = parsePem(ders.map(toPem).join('\n'))
        if (!parsed.ok) return reject(new ProbeError(parsed.error))
        const leaf = parsed.leaf
        const err = socket.authorizationError
        resolve({
          pem: parsed.pem,
          info: parsed.info,
          chain: parsed.chain,
          protocol: socket.getProtocol(),
          authorized: socket.authorized,
          authorizationError: err ? String(err) : undefined,
          hostnameMatches: (isIP(domain) ? leaf.checkIP(domain) : leaf.checkHost(domain)) !== undefined,
        })
      }),
    )
  })
}

import { lookup } from 'node:dns/promises'
import { isIP } from 'node:net'
import { HttpError } from './http'

/*
 * The one outbound policy (issue 34 point 5). Every request to a host given through the API (a
 * webhook or chat channel, an SMTP host, a certificate probe, an ML serving endpoint, an ops
 * webhook) goes through `Outbound`: the host is resolved, every address it resolves to is checked
 * against the policy, and the connection is made to the checked address, so a DNS name cannot
 * answer one address to the check and another to the connection. Targets written in the YAML by
 * whoever runs the server are trusted (`Outbound.trusted`), as GitLab trusts its admin's settings
 * but not its webhooks.
 */

type Family = 4 | 6
interface Cidr {
  family: Family
  base: bigint
  prefix: number
}
type Source = 'deny' | 'allow' | 'default-deny' | 'default-allow'
interface Rule extends Cidr {
  source: Source
}

/** At equal specificity the operator's list beats the defaults, and deny beats allow. */
const RANK: Record<Source, number> = { deny: 3, allow: 2, 'default-deny': 1, 'default-allow': 0 }

/**
 * Denied unless the operator allows them: loopback, private networks, link-local, shared and
 * reserved space. The cloud metadata endpoints are listed one by one, so that allowing a whole
 * network (`100.64.0.0/10`) does not open the metadata address inside it; only an exact entry does.
 */
export const DEFAULT_DENY = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '224.0.0.0/3',
  '::/128',
  '::1/128',
  'fc00::/7',
  'fe80::/10',
  'ff00::/8',
  // IPv6 forms whose IPv4 sits elsewhere than the last 32 bits (parseAddress maps the others):
  // local-use NAT64 (RFC 8215; where the IPv4 sits depends on the prefix length the network
  // chose) and 6to4 (RFC 3056, deprecated by RFC 7526), each a way to an IPv4 host behind them.
  '64:ff9b:1::/48',
  '2002::/16',
  // Cloud metadata and platform endpoints (AWS, GCP, Azure, OpenStack, ECS, Alibaba, Oracle).
  '169.254.169.254/32',
  '169.254.170.2/32',
  '168.63.129.16/32',
  '100.100.100.200/32',
  '192.0.0.192/32',
  'fd00:ec2::254/128',
] as const

function parseV4(s: string): bigint | undefined {
  const parts = s.split('.')
  if (parts.length !== 4) return undefined
  let v = 0n
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p) || Number(p) > 255) return undefined
    v = (v << 8n) | BigInt(p)
  }
  return v
}

function parseV6(input: string): bigint | undefined {
  let s = input.split('%', 1)[0]
  let tail: bigint[] = []
  const dot = s.lastIndexOf(':')
  if (s.includes('.')) {
    const v4 = parseV4(s.slice(dot + 1))
    if (v4 === undefined) return undefined
    tail = [v4 >> 16n, v4 & 0xffffn]
    s = `${s.slice(0, dot + 1)}0`
  }
  const halves = s.split('::')
  if (halves.length > 2) return undefined
  const words = (h: string) => (h ? h.split(':') : [])
  const head = words(halves[0])
  const rest = halves.length === 2 ? words(halves[1]) : []
  const given = [...head, ...rest].map((w) => (/^[0-9a-f]{1,4}$/i.test(w) ? BigInt(`0x${w}`) : undefined))
  if (given.some((w) => w === undefined)) return undefined
  if (tail.length) given.pop()
  const known = given.length + tail.length
  const fill = halves.length === 2 ? 8 - known : 0
  if (fill < 0 || (halves.length === 1 && known !== 8)) return undefined
  const all = [
    ...(given.slice(0, head.length) as bigint[]),
    ...Array<bigint>(fill).fill(0n),
    ...(given.slice(head.length) as bigint[]),
    ...tail,
  ]
  if (all.length !== 8) return undefined
  return all.reduce((v, w) => (v << 16n) | w, 0n)
}

/**
 * The IPv6 networks whose last 32 bits are an IPv4 address, by their first 96 bits: IPv4-mapped
 * `::ffff:0:0/96`, IPv4-translated (SIIT) `::ffff:0:0:0/96`, IPv4-compatible `::/96` (deprecated,
 * RFC 4291; `::` and `::1` stay IPv6), well-known NAT64 `64:ff9b::/96`. A host or gateway that
 * speaks one of them reaches the IPv4 address, so the IPv4 rules judge it.
 */
const EMBEDS_V4 = new Set([0xffffn, 0xffff0000n, 0n, 0x0064ff9b0000000000000000n])

/** An address as a family and a number; IPv4 inside IPv6 (EMBEDS_V4) as IPv4. */
export function parseAddress(s: string): { family: Family; value: bigint } | undefined {
  const bare = s.startsWith('[') && s.endsWith(']') ? s.slice(1, -1) : s
  const v4 = parseV4(bare)
  if (v4 !== undefined) return { family: 4, value: v4 }
  const v6 = parseV6(bare)
  if (v6 === undefined) return undefined
  if (EMBEDS_V4.has(v6 >> 32n) && v6 > 1n) return { family: 4, value: v6 & 0xffffffffn }
  return { family: 6, value: v6 }
}

/** `10.0.0.0/8`, `fd00::/8`, or a single address (its whole width). */
export function parseCidr(text: string): Cidr | undefined {
  const [addr, bits, extra] = text.trim().split('/')
  if (extra !== undefined) return undefined
  const a = parseAddress(addr)
  if (!a) return undefined
  // An IPv4 network written in IPv6 form (`::ffff:10.0.0.0/104`) counts in IPv4 bits.
  const width = a.family === 4 ? 32 : 128
  let prefix = bits === undefined ? width : Number(bits)
  if (bits !== undefined && !/^\d{1,3}$/.test(bits)) return undefined
  if (a.family === 4 && addr.includes(':') && bits !== undefined) prefix -= 96
  if (!(prefix >= 0 && prefix <= width)) return undefined
  const mask = prefix === 0 ? 0n : ((1n << BigInt(prefix)) - 1n) << BigInt(width - prefix)
  return { family: a.family, base: a.value & mask, prefix }
}

const contains = (c: Cidr, family: Family, value: bigint) => {
  if (c.family !== family) return false
  const width = family === 4 ? 32 : 128
  const shift = BigInt(width - c.prefix)
  return value >> shift === c.base >> shift
}

/** Startup errors for a list of CIDRs at `path` (`outbound.allow`). */
export function cidrErrors(list: readonly string[], path: string): string[] {
  return list.flatMap((c, i) =>
    parseCidr(c) ? [] : [`${path}[${i}]: '${c}' is not an address or a network in CIDR notation`],
  )
}

export interface OutboundSettings {
  /** Networks API-given targets may reach beyond the public internet (loopback, private ranges). */
  allow: readonly string[]
  /** Networks they may never reach, public ones included. */
  deny: readonly string[]
}

/** The decision for one address: the most specific rule that contains it wins. */
export class OutboundPolicy {
  private rules: Rule[]

  constructor(readonly settings: OutboundSettings) {
    const rules = (list: readonly string[], source: Source) =>
      list.map((c) => {
        const parsed = parseCidr(c)
        if (!parsed) throw new Error(`outbound: '${c}' is not an address or a network in CIDR notation`)
        return { ...parsed, source }
      })
    this.rules = [
      ...rules(['0.0.0.0/0', '::/0'], 'default-allow'),
      ...rules(DEFAULT_DENY, 'default-deny'),
      ...rules(settings.allow, 'allow'),
      ...rules(settings.deny, 'deny'),
    ]
  }

  allows(address: string): boolean {
    const a = parseAddress(address)
    if (!a) return false
    let best: Rule | undefined
    for (const r of this.rules)
      if (
        contains(r, a.family, a.value) &&
        (!best || r.prefix > best.prefix || (r.prefix === best.prefix && RANK[r.source] > RANK[best.source]))
      )
        best = r
    return !!best && (best.source === 'allow' || best.source === 'default-allow')
  }
}

/** The policy refused the target: said at once, before any connection is tried. */
export class OutboundRefused extends HttpError {
  constructor(host: string) {
    super(400, 'outbound_refused', `${host}: not an allowed destination (outbound policy)`)
  }
}

/**
 * What an operator reads when an allowed target could not be reached: one text whether the port
 * was closed, silent, reset or the name did not resolve, so the answers make no port scanner.
 */
export const NO_ANSWER = 'no answer (refused, reset or timed out)'

/** The short line for a failed outbound attempt: the policy's refusal, else NO_ANSWER. */
export function outboundFailure(e: unknown): string {
  return e instanceof OutboundRefused ? e.message : NO_ANSWER
}

/** Every address a name resolves to. */
export type Resolver = (name: string) => Promise<string[]>
const systemLookup: Resolver = async (name) =>
  (await lookup(name, { all: true, verbatim: true })).map((a) => a.address)

const stripBrackets = (host: string) =>
  host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host

/**
 * Outbound connections under the policy. `address(host)` answers the checked address to connect
 * to (raw TCP and TLS: SMTP, certificate probes); `fetch` makes an HTTP request to the checked
 * address with the original Host header and TLS server name, and never follows a redirect (a
 * 3xx answer is a failed send, not a way past the check). `trusted` is the same client without
 * the policy, for targets the YAML names.
 */
export class Outbound {
  /** The client for targets written in the YAML: no policy. */
  readonly trusted: Outbound
  private lookup: Resolver

  constructor(
    readonly policy: OutboundPolicy | null,
    /** The name resolver: the system's, or a test's own DNS (a process edge). */
    opts: { lookup?: Resolver } = {},
  ) {
    this.lookup = opts.lookup ?? systemLookup
    this.trusted = policy ? new Outbound(null) : this
  }

  /** The checked address of `host`: every address it resolves to must be allowed. */
  async address(host: string): Promise<string> {
    const bare = stripBrackets(host)
    if (!this.policy) return bare
    let addresses: string[]
    if (isIP(bare)) addresses = [bare]
    else {
      try {
        addresses = await this.lookup(bare)
      } catch {
        throw new Error(NO_ANSWER)
      }
    }
    if (!addresses.length || !addresses.every((a) => this.policy!.allows(a))) throw new OutboundRefused(host)
    return addresses[0]
  }

  /**
   * For a check when a target is configured: throws OutboundRefused when the policy refuses
   * `host`; a name that does not resolve (yet) passes, and fails its sends as NO_ANSWER.
   */
  async refuseEarly(host: string): Promise<void> {
    await this.address(host).catch((e) => {
      if (e instanceof OutboundRefused) throw e
    })
  }

  /** Throws OutboundRefused when `url` is not http(s) or its host is refused; else its checked address. */
  async check(url: string | URL): Promise<string> {
    const u = new URL(url)
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new OutboundRefused(u.protocol)
    return this.address(u.hostname)
  }

  async fetch(url: string | URL, init: RequestInit = {}): Promise<Response> {
    if (!this.policy) return fetch(url, init)
    const u = new URL(url)
    const address = await this.check(u)
    const pinned = new URL(u)
    pinned.hostname = address.includes(':') ? `[${address}]` : address
    const headers = new Headers(init.headers)
    const name = stripBrackets(u.hostname)
    if (!isIP(name) && !headers.has('host')) headers.set('host', u.host)
    const tls =
      u.protocol === 'https:' && !isIP(name)
        ? { ...(init as { tls?: Record<string, unknown> }).tls, serverName: name }
        : undefined
    return fetch(pinned, { ...init, headers, redirect: 'manual', ...(tls ? { tls } : {}) } as RequestInit)
  }
}

/** `LIVEOPS_OUTBOUND_ALLOW=127.0.0.0/8,10.0.0.0/8`: a comma-separated list. */
export const splitList = (v: string) =>
  v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)

/**
 * At most `bytes` of an answer's body, for a debug log line; the rest is never read (a target
 * cannot make the server hold a large answer in memory).
 */
export async function answerPrefix(res: Response, bytes = 1000): Promise<string> {
  if (!res.body) return ''
  const reader = res.body.getReader()
  const parts: Uint8Array[] = []
  let size = 0
  try {
    while (size < bytes) {
      const { done, value } = await reader.read()
      if (done) break
      parts.push(value)
      size += value.byteLength
    }
  } catch {
    // A body cut short is still a prefix.
  } finally {
    reader.cancel().catch(() => undefined)
  }
  return new TextDecoder().decode(Buffer.concat(parts).subarray(0, bytes))
}

import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import http2 from 'node:http2'
import { freePort } from '../../plugins/ingest/otlp/exporters'
import { type TestApp, forEachEngine, makeApp } from '../helpers'
import { GAME, SIGNING_SECRET } from './lib'

/*
 * The eighteenth session's OTLP/gRPC audit, replayed as it was made: raw HTTP/2 streams to the
 * collector port, each announcing a message of the body limit and sending all but its last byte,
 * then holding. grpc-js held every such message in memory (1.9 GB from 4 connections, no
 * credential at all) and closed none of the streams.
 */
const LOGS = '/opentelemetry.proto.collector.logs.v1.LogsService/Export'
const LIMIT_KB = 64
const READ_TIMEOUT_MS = 1_000
/** Longer than the read timeout: a stream not answered by then was left holding its bytes. */
const WAIT_MS = 4_000
/** Room for two waits, so the old server's silence fails an assertion rather than the test's time. */
const TEST_MS = 20_000

/** Opens a stream, sends all but the last byte of a message of the body limit, and says how the call ended. */
function heldCall(session: http2.ClientHttp2Session, metadata: Record<string, string> = {}) {
  return new Promise<{ status: string; cut: boolean }>((resolve) => {
    let status = 'no answer'
    // Whether the server ended the stream (told the client to stop sending), or the client gave up.
    let cut = true
    const st = session.request({
      ':method': 'POST',
      ':path': LOGS,
      'content-type': 'application/grpc',
      te: 'trailers',
      ...metadata,
    })
    const note = (h: http2.IncomingHttpHeaders) => {
      if (h['grpc-status'] !== undefined) status = String(h['grpc-status'])
    }
    st.on('response', note)
    st.on('trailers', note)
    st.on('error', () => {})
    st.on('close', () => resolve({ status, cut }))
    st.resume()
    const len = LIMIT_KB * 1024 - 16
    const prefix = Buffer.alloc(5)
    prefix.writeUInt32BE(len, 1)
    st.write(Buffer.concat([prefix, Buffer.alloc(len - 1, 0x41)]))
    // Never ended: the old server waited for the last byte for as long as the client liked.
    setTimeout(() => {
      cut = false
      if (!st.closed) st.close()
    }, WAIT_MS).unref()
  })
}

/** The local addresses listening on `port`, from the kernel's socket tables (`0.0.0.0`, `127.0.0.1`, `::`). */
function listeningOn(port: number): string[] {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0')
  const out: string[] = []
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const [, local, , state] = line.trim().split(/\s+/)
      if (state !== '0A' || !local?.endsWith(`:${hexPort}`)) continue
      const hex = local.slice(0, -5)
      if (hex.length === 8) out.push(Buffer.from(hex, 'hex').reverse().join('.'))
      else out.push(/^0+$/.test(hex) ? '::' : hex === '00000000000000000000000001000000' ? '::1' : hex)
    }
  }
  return out
}

forEachEngine((engine) => {
  let a: TestApp
  let port: number
  let key: string
  const sessions: http2.ClientHttp2Session[] = []
  const connect = () => {
    const s = http2.connect(`http://127.0.0.1:${port}`)
    s.on('error', () => {})
    sessions.push(s)
    return s
  }
  beforeAll(async () => {
    port = await freePort()
    a = await makeApp(engine, {
      plugins: {
        games: {},
        ingest: {
          signing_secret: SIGNING_SECRET,
          purge_interval_minutes: 0,
          batch_max_body_kb: LIMIT_KB,
          // No host of its own: the HTTP server's.
          otlp: { grpc: { enabled: true, port, read_timeout_ms: READ_TIMEOUT_MS } },
        },
      },
      config: { server: { host: '127.0.0.1' } },
    })
    const admin = await a.token('admin')
    const g = await a.req('POST', '/api/games', { token: admin, body: { ...GAME, name: 'Otlp Grpc' } })
    const k = await a.req('POST', '/api/api-keys', {
      token: admin,
      body: { name: 'otel', gameId: g.body.id, environment: 'prod' },
    })
    expect(k.status).toBe(201)
    key = k.body.key
  })
  afterAll(async () => {
    for (const s of sessions) s.destroy()
    await a.stop()
  })

  test("OTLP/gRPC listens on the HTTP server's host unless given one of its own", () => {
    expect(listeningOn(port)).toEqual(['127.0.0.1'])
  })

  describe('OTLP/gRPC holds no message for a caller it cannot trust', () => {
    test(
      'streams without a credential are refused UNAUTHENTICATED before their message is read',
      async () => {
        const calls = [connect(), connect()].flatMap((s) => Array.from({ length: 20 }, () => heldCall(s)))
        const ended = await Promise.all(calls)
        expect(ended).toEqual(ended.map(() => ({ status: '16', cut: true })))
      },
      TEST_MS,
    )

    test(
      'a wrong key is refused UNAUTHENTICATED before the message; a right one is read',
      async () => {
        expect(await heldCall(connect(), { 'x-api-key': 'lk_not-a-key' })).toEqual({
          status: '16',
          cut: true,
        })
        // The right key's message is read, and its call ends at the read timeout, unfinished.
        expect(await heldCall(connect(), { 'x-api-key': key })).toEqual({ status: '4', cut: true })
      },
      TEST_MS,
    )

    test('a connection announces at most 32 streams at once', async () => {
      const s = connect()
      await new Promise((resolve) => s.once('remoteSettings', resolve))
      expect(s.remoteSettings.maxConcurrentStreams).toBeLessThanOrEqual(32)
    })

    test(
      'signature headers (the signature covers the bytes): 16 held per address, each cut at the read timeout',
      async () => {
        const signed = () => ({
          'x-timestamp': String(Math.floor(Date.now() / 1000)),
          'x-nonce': crypto.randomUUID(),
          'x-signature': `${'A'.repeat(43)}=`,
        })
        const first = Array.from({ length: 16 }, () => heldCall(connect(), signed()))
        // Over the bound: RESOURCE_EXHAUSTED at once, its bytes never read.
        expect(await heldCall(connect(), signed())).toEqual({ status: '8', cut: true })
        const held = await Promise.all(first)
        expect(held).toEqual(held.map(() => ({ status: '4', cut: true })))
        // Their slots are free again.
        expect(await heldCall(connect(), signed())).toEqual({ status: '4', cut: true })
      },
      TEST_MS,
    )
  })
})

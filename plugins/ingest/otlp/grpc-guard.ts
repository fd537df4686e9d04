import http2 from 'node:http2'
import * as grpc from '@grpc/grpc-js'
import { HttpError } from '../../../core/http'
import { GRPC, grpcCode, refusalText } from './answer'

/**
 * What an OTLP/gRPC call must show before grpc-js reads its message. grpc-js holds a message in
 * memory until its last byte arrives; a stranger opening hundreds of streams, each sending all
 * but the last byte of a 1 MB message, had 1.9 GB held with no credential at all. So the
 * credential is checked on the metadata (the key in full; a signature's headers, the signature
 * itself covering the bytes), the calls whose message is being read are counted per peer and in
 * all, and a message still unfinished after `readTimeoutMs` ends its call.
 */
export interface GuardOptions {
  /** The refusal of the call's credential, or undefined when the message may be read. */
  check(metadata: grpc.Metadata): Promise<HttpError | undefined>
  readTimeoutMs: number
  /** Calls being read at once, all peers together. */
  maxReading: number
  /** Calls being read at once from one address. */
  maxReadingPerPeer: number
  /** Told of every call the guard ends: the method's path and the gRPC status code. */
  onRefuse?(path: string, code: number): void
}

/** `ipv4:127.0.0.1:5000`, `ipv6:[::1]:5000` or `127.0.0.1:5000` → the address alone. */
export function peerAddress(peer: string): string {
  const s = peer.replace(/^ipv[46]:/, '')
  const bracket = s.match(/^\[(.*)\]:\d+$/)
  if (bracket) return bracket[1]
  const i = s.lastIndexOf(':')
  return i > 0 ? s.slice(0, i) : s
}

/**
 * grpc-js answers a refused call but keeps its stream while the client is still sending, and with
 * it the part of the message already read (up to the body limit), for as long as the client holds
 * the stream. A reset with NO_ERROR (RFC 9113 section 8.1: the response is complete, stop sending)
 * lets both go. grpc-js has no call for it; its base call keeps the HTTP/2 stream as `stream`, so
 * this works while the guard is the only interceptor, and does nothing where that is not so.
 */
function stopSending(call: object): void {
  const stream = (call as { stream?: { closed?: boolean; close?: (code: number) => void } }).stream
  if (stream && typeof stream.close === 'function' && !stream.closed)
    stream.close(http2.constants.NGHTTP2_NO_ERROR)
}

export function callGuard(o: GuardOptions): grpc.ServerInterceptor {
  const perPeer = new Map<string, number>()
  let reading = 0
  return (method, call) => {
    let peer: string | undefined
    let timer: ReturnType<typeof setTimeout> | undefined
    let over = false
    // The call's slot and timer go when its message is in, or the call ends either way.
    const release = () => {
      over = true
      if (timer) clearTimeout(timer)
      timer = undefined
      if (peer === undefined) return
      const n = (perPeer.get(peer) ?? 1) - 1
      if (n > 0) perPeer.set(peer, n)
      else perPeer.delete(peer)
      reading--
      peer = undefined
    }
    const refuse = (code: number, details: string) => {
      if (over) return
      release()
      o.onRefuse?.(method.path, code)
      call.sendStatus({ code, details })
      stopSending(call)
    }
    const admit = (metadata: grpc.Metadata, next: (m: grpc.Metadata) => void) => {
      if (over) return
      const from = peerAddress(call.getPeer())
      if (reading >= o.maxReading || (perPeer.get(from) ?? 0) >= o.maxReadingPerPeer)
        return refuse(
          GRPC.RESOURCE_EXHAUSTED,
          `too many calls under way: at most ${o.maxReadingPerPeer} from one address and ${o.maxReading} in all are read at once; retry later`,
        )
      peer = from
      perPeer.set(from, (perPeer.get(from) ?? 0) + 1)
      reading++
      timer = setTimeout(
        () =>
          refuse(
            grpc.status.DEADLINE_EXCEEDED,
            `the request message did not arrive within ${o.readTimeoutMs} ms of the call's start`,
          ),
        o.readTimeoutMs,
      )
      next(metadata)
    }
    const listener = new grpc.ServerListenerBuilder()
      .withOnReceiveMetadata((metadata, next) => {
        o.check(metadata).then(
          (e) => (e ? refuse(grpcCode(e.status), refusalText(e)) : admit(metadata, next)),
          (e: unknown) =>
            e instanceof HttpError
              ? refuse(grpcCode(e.status), refusalText(e))
              : refuse(GRPC.UNAVAILABLE, 'unavailable: the credential could not be checked'),
        )
      })
      .withOnReceiveHalfClose((next) => {
        release()
        next()
      })
      .withOnCancel(release)
      .build()
    const responder = new grpc.ResponderBuilder()
      .withStart((next) => next(listener))
      .withSendStatus((status, next) => {
        release()
        next(status)
      })
      .build()
    return new grpc.ServerInterceptingCall(call, responder)
  }
}

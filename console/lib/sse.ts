import { ApiError, type Query, raw } from './api'

export interface StreamEvent {
  event: string
  id?: string
  data: string
}

export type StreamState =
  | { kind: 'connecting' }
  | { kind: 'open' }
  | { kind: 'waiting'; seconds: number; why: string }
  | { kind: 'failed'; error: ApiError }

/**
 * Server-sent events read with fetch rather than EventSource: the access token travels in the
 * Authorization header (never in the address, where logs keep it) and is refreshed like any
 * other call. Reconnects after the server's `retry:` advice with Last-Event-ID, so missed
 * snapshots are replayed; stops on a refusal (403, 404). Returns the function that closes it.
 */
export function openStream(
  path: string,
  query: Query,
  onEvent: (e: StreamEvent) => void,
  onState: (s: StreamState) => void,
): () => void {
  const ctl = new AbortController()
  let lastId: string | undefined
  let retryMs = 3000
  const run = async () => {
    while (!ctl.signal.aborted) {
      onState({ kind: 'connecting' })
      let why = 'the stream ended'
      try {
        const res = await raw('GET', path, {
          query,
          signal: ctl.signal,
          headers: { accept: 'text/event-stream', ...(lastId ? { 'last-event-id': lastId } : {}) },
        })
        onState({ kind: 'open' })
        const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader()
        let buf = ''
        for (;;) {
          const { done, value } = await reader.read()
          if (done) break
          buf += value
          let cut = buf.indexOf('\n\n')
          while (cut >= 0) {
            const block = buf.slice(0, cut)
            buf = buf.slice(cut + 2)
            cut = buf.indexOf('\n\n')
            const ev: StreamEvent = { event: 'message', data: '' }
            const data: string[] = []
            for (const line of block.split('\n')) {
              if (!line || line.startsWith(':')) continue
              const i = line.indexOf(':')
              const field = i < 0 ? line : line.slice(0, i)
              const v = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '')
              if (field === 'event') ev.event = v
              else if (field === 'data') data.push(v)
              else if (field === 'id') ev.id = v
              else if (field === 'retry' && Number(v) > 0) retryMs = Number(v)
            }
            if (ev.id) lastId = ev.id
            if (data.length) onEvent({ ...ev, data: data.join('\n') })
            if (ev.event === 'end') return ctl.abort()
          }
        }
      } catch (e) {
        if (ctl.signal.aborted) return
        if (e instanceof ApiError && e.status !== 0 && e.status !== 503 && e.status < 500) {
          onState({ kind: 'failed', error: e })
          return
        }
        why = e instanceof ApiError ? e.message : 'the connection broke'
        if (e instanceof ApiError && e.retryAfter) retryMs = e.retryAfter * 1000
      }
      if (ctl.signal.aborted) return
      onState({ kind: 'waiting', seconds: Math.round(retryMs / 1000), why })
      await new Promise((r) => setTimeout(r, retryMs))
    }
  }
  void run()
  return () => ctl.abort()
}

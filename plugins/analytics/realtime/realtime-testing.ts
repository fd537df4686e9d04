import { connect } from 'node:net'

/** One server-sent event frame: its fields, and the comment lines it carried. */
export interface Frame {
  id?: string
  event?: string
  data?: string
  retry?: string
  comments: string[]
}

/** Reads a `text/event-stream` body frame by frame (the test side of the realtime stream). */
export class SseReader {
  readonly frames: Frame[] = []
  private reader: ReadableStreamDefaultReader<Uint8Array>
  private decoder = new TextDecoder()
  private buf = ''
  private read = 0

  constructor(body: ReadableStream<Uint8Array>) {
    this.reader = body.getReader()
  }

  /** The next frame (after those already returned) that `match` accepts; throws past the deadline. */
  async next(match: (f: Frame) => boolean = () => true, ms = 10_000): Promise<Frame> {
    const deadline = Date.now() + ms
    for (;;) {
      while (this.read < this.frames.length) {
        const f = this.frames[this.read++]
        if (match(f)) return f
      }
      const left = deadline - Date.now()
      if (left <= 0) throw new Error(`no matching frame within ${ms} ms; got ${JSON.stringify(this.frames)}`)
      let timer: Timer | undefined
      const chunk = await Promise.race([
        this.reader.read(),
        new Promise<'late'>((r) => {
          timer = setTimeout(() => r('late'), left)
        }),
      ])
      clearTimeout(timer)
      if (chunk === 'late') continue
      if (chunk.done) throw new Error(`stream ended; got ${JSON.stringify(this.frames)}`)
      this.buf += this.decoder.decode(chunk.value, { stream: true })
      let end = this.buf.indexOf('\n\n')
      while (end >= 0) {
        this.frames.push(parse(this.buf.slice(0, end)))
        this.buf = this.buf.slice(end + 2)
        end = this.buf.indexOf('\n\n')
      }
    }
  }

  /** The next `event: snapshot`, its data parsed. */
  async snapshot(ms?: number): Promise<{ id: string; data: Record<string, unknown> }> {
    const f = await this.next((x) => x.event === 'snapshot', ms)
    return { id: f.id!, data: JSON.parse(f.data!) }
  }

  cancel(): Promise<void> {
    return this.reader.cancel()
  }
}

function parse(block: string): Frame {
  const f: Frame = { comments: [] }
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) {
      f.comments.push(line.slice(1).trim())
      continue
    }
    const i = line.indexOf(':')
    const name = i < 0 ? line : line.slice(0, i)
    const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '')
    if (name === 'id' || name === 'event' || name === 'retry') f[name] = value
    else if (name === 'data') f.data = f.data === undefined ? value : `${f.data}\n${value}`
  }
  return f
}

/**
 * An SSE client on a bare TCP socket: thousands of them cost little (Bun's fetch runs a bounded
 * number of requests at once, so long-lived streams past that bound would never start). Counts
 * the snapshots it saw; the test and the benchmark hold many at once.
 */
export function rawStream(base: string, path: string, headers: Record<string, string> = {}) {
  const url = new URL(base)
  const sock = connect(Number(url.port), url.hostname)
  const state = { status: 0, snapshots: 0, closed: false, error: '' }
  // The unread end of the last chunk: a frame may split across reads.
  let tail = ''
  const MARK = 'event: snapshot'
  sock.setEncoding('utf8')
  sock.on('connect', () => {
    const lines = [`GET ${path} HTTP/1.1`, `Host: ${url.host}`, 'Accept: text/event-stream']
    for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`)
    sock.write(`${lines.join('\r\n')}\r\n\r\n`)
  })
  sock.on('data', (chunk: string) => {
    const text = tail + chunk
    if (!state.status) {
      const m = text.match(/^HTTP\/1\.1 (\d{3})/)
      if (!m) {
        tail = text
        return
      }
      state.status = Number(m[1])
    }
    const parts = text.split(MARK)
    state.snapshots += parts.length - 1
    tail = parts[parts.length - 1].slice(-(MARK.length - 1))
  })
  sock.on('error', (e) => {
    state.error = String(e)
  })
  sock.on('close', () => {
    state.closed = true
  })
  return {
    state,
    close: () => sock.destroy(),
  }
}

import type { Socket, TCPSocketListener } from 'bun'

/**
 * How the proxy treats traffic:
 * - `pass` forwards both ways;
 * - `refuse` closes every connection and refuses new ones (a stopped server);
 * - `hang` closes every connection and accepts new ones that are never answered (a host that went
 *   away: clients reconnect into silence);
 * - `blackhole` keeps every connection open but forwards nothing more, either way, and answers no
 *   new one (a network that drops packets: nothing tells the client anything).
 */
export type ProxyMode = 'pass' | 'refuse' | 'hang' | 'blackhole'

type Side = { peer?: Socket<Side>; queue: Uint8Array[] }

/** A TCP proxy on a loopback port in front of `target`, cut and restored by `set`. */
export function tcpProxy(target: { hostname: string; port: number }) {
  let mode: ProxyMode = 'pass'
  /** Replies wait this long before they go on (a slow server that still answers everything). */
  let delayMs = 0
  const open = new Set<Socket<Side>>()
  const forwarding = () => mode === 'pass'
  let server: TCPSocketListener<Side> | undefined
  const start = (port = 0): TCPSocketListener<Side> =>
    Bun.listen<Side>({
      hostname: '127.0.0.1',
      port,
      socket: {
        async open(client) {
          client.data = { queue: [] }
          open.add(client)
          if (!forwarding()) return
          const upstream = await Bun.connect<Side>({
            ...target,
            socket: {
              data(_s, chunk) {
                if (!delayMs) {
                  if (forwarding()) client.write(chunk)
                  return
                }
                const copy = new Uint8Array(chunk)
                setTimeout(() => forwarding() && client.write(copy), delayMs)
              },
              close() {
                client.end()
              },
              error() {
                client.end()
              },
            },
          })
          upstream.data = { peer: client, queue: [] }
          client.data.peer = upstream
          for (const c of client.data.queue) upstream.write(c)
          open.add(upstream)
        },
        data(client, chunk) {
          if (!forwarding()) return
          if (client.data.peer) client.data.peer.write(chunk)
          else client.data.queue.push(new Uint8Array(chunk))
        },
        close(client) {
          client.data.peer?.end()
          open.delete(client)
        },
      },
    })
  server = start()
  const port = server.port
  return {
    port,
    /** Holds every reply back `ms` (0: none). */
    delay(ms: number) {
      delayMs = ms
    },
    set(next: ProxyMode) {
      mode = next
      if (next === 'refuse') {
        server?.stop(true)
        server = undefined
      } else server ??= start(port)
      // A blackhole keeps the connections it silenced open; every other change ends them (so
      // nothing that began in one mode carries on in the next).
      if (next === 'blackhole') return
      for (const s of open) s.end()
      open.clear()
    },
    stop() {
      for (const s of open) s.end()
      server?.stop(true)
    },
  }
}

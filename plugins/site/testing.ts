// Test helpers of the site plugin's tests: a receiver that keeps each request's raw bytes (for
// signatures), and the alert the tests raise.

export interface Hit {
  url: URL
  headers: Headers
  raw: string
}

/** A loopback HTTP receiver answering like a chat robot; `status` decides its answers. */
export function sink(status = () => 200) {
  const hits: Hit[] = []
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(req) {
      hits.push({ url: new URL(req.url), headers: req.headers, raw: await req.text() })
      return new Response('{"errcode":0,"errmsg":"ok"}', { status: status() })
    },
  })
  return { hits, url: `http://127.0.0.1:${server.port}`, stop: () => server.stop(true) }
}

/** An `alert.fired` of the ops alerts, named by its title. */
export const alert = (title: string) => ({
  alert_id: `ops-alerts:r1:${title}`,
  source: 'ops-alerts',
  level: 'critical' as const,
  title,
  body: 'svc_db_latency_ms is 812 (> 500) for 3 checks',
  params: { metric: 'svc_db_latency_ms' },
  at: new Date().toISOString(),
})

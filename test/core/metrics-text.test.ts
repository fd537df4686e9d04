import { expect, test } from 'bun:test'
import { Metrics, renderText } from '../../core/metrics'

test('the fast Prometheus text is byte for byte what prom-client writes, escapes and odd values included', async () => {
  const m = new Metrics()
  const g = m.gauge('svc_fleet_qps', 'per agent "qps" \\ with a\nnewline', ['agent_id', 'game_id'])
  for (let i = 0; i < 300; i++)
    g.set(
      { agent_id: `agent-${i}`, game_id: i % 7 ? `g-${i % 7}` : 'q"uo\\te\nd' },
      i % 11 ? i / 3 : Number.NaN,
    )
  g.set({ agent_id: 'neg', game_id: 'x' }, Number.NEGATIVE_INFINITY)
  m.counter('svc_things_total', 'things').inc(3)
  m.gauge('svc_never_set', 'no series', ['x'])
  m.histogram('svc_latency', 'h', ['route'], [0.1, 1]).observe({ route: '/a' }, 0.5)
  m.http.observe({ method: 'GET', route: '/x', status: '200' }, 0.002)
  const expected = await m.registry.metrics()
  expect(await renderText(m.registry)).toBe(expected)
  // Again, with the label cache warm and values changed.
  g.set({ agent_id: 'agent-1', game_id: 'g-1' }, 42)
  expect(await renderText(m.registry)).toBe(await m.registry.metrics())
})

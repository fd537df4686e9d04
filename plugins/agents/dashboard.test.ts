import { expect, test } from 'bun:test'
import { makeApp } from '../../test/helpers'

test('the Grafana dashboard queries only metrics the app exposes', async () => {
  const dash = await Bun.file(new URL('../../docs/grafana/liveops.json', import.meta.url)).json()
  const exprs: string[] = dash.panels.flatMap((p: { targets?: Array<{ expr: string }> }) =>
    (p.targets ?? []).map((t) => t.expr),
  )
  const queried = new Set(
    [...exprs, ...dash.templating.list.map((v: { definition?: string }) => v.definition ?? '')]
      .flatMap((e) => e.match(/svc_[a-z0-9_]+/g) ?? [])
      .map((n) => n.replace(/_(bucket|count|sum)$/, '')),
  )
  expect(queried.size).toBeGreaterThan(10)
  const a = await makeApp('sqlite', { config: { telemetry: { prometheus: { enabled: true } } } })
  try {
    const text = (await a.req('GET', '/metrics/prometheus')).body as string
    const exposed = new Set([...text.matchAll(/^# TYPE (\S+)/gm)].map((m) => m[1]))
    expect([...queried].filter((n) => !exposed.has(n))).toEqual([])
  } finally {
    await a.stop()
  }
})

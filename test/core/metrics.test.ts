import { describe, expect, test } from 'bun:test'
import { Histogram, Registry } from 'prom-client'
import { Metrics, RouteHistogram } from '../../core/metrics'

const BOUNDS = [0.001, 0.01, 0.1, 1]

describe('request histogram', () => {
  test('prints exactly what a prom-client Histogram prints for the same observations', async () => {
    const ours = new Registry()
    const theirs = new Registry()
    const h = new RouteHistogram('svc_x_seconds', 'x help', BOUNDS)
    ours.registerMetric(h as never)
    const p = new Histogram({
      name: 'svc_x_seconds',
      help: 'x help',
      labelNames: ['method', 'route', 'status'],
      buckets: BOUNDS,
      registers: [theirs],
    })
    const samples: Array<[string, string, string, number]> = [
      ['GET', '/a', '200', 0.0004],
      ['GET', '/a', '200', 0.001],
      ['GET', '/a', '200', 0.05],
      ['POST', '/b/:id', '401', 0.2],
      ['POST', '/b/:id', '401', 7],
      ['GET', '/a', '404', 0.0101],
    ]
    const child = h.labels({ method: 'GET', route: '/a', status: '200' })
    for (const [method, route, status, v] of samples) {
      p.observe({ method, route, status }, v)
      if (method === 'GET' && route === '/a' && status === '200') child.observe(v)
      else h.observe({ method, route, status }, v)
    }
    expect(await ours.metrics()).toBe(await theirs.metrics())
  })

  test('a value above every bound is counted in +Inf, _count and _sum only', async () => {
    const h = new RouteHistogram('svc_y_seconds', 'y', BOUNDS)
    h.observe({ method: 'GET', route: '/', status: '200' }, 5)
    const { values } = await h.get()
    const buckets = values.filter((v) => v.metricName.endsWith('_bucket')).map((v) => v.value)
    expect(buckets).toEqual([0, 0, 0, 0, 1])
    expect(values.find((v) => v.metricName.endsWith('_sum'))?.value).toBe(5)
    expect(values.find((v) => v.metricName.endsWith('_count'))?.value).toBe(1)
  })

  test('the app registry serves it under its name, in text and not in the JSON gauges', async () => {
    const m = new Metrics()
    m.http.observe({ method: 'GET', route: '/healthz', status: '200' }, 0.002)
    expect(await m.text()).toContain(
      'svc_http_request_duration_seconds_count{method="GET",route="/healthz",status="200"} 1',
    )
    expect(await m.json()).not.toHaveProperty('svc_http_request_duration_seconds')
  })
})

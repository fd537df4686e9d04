import { describe, expect, test } from 'bun:test'
import { Metrics } from '../../core/metrics'

describe('request histogram', () => {
  test('the app registry serves it under its name, in text and not in the JSON gauges', async () => {
    const m = new Metrics()
    m.http.observe({ method: 'GET', route: '/healthz', status: '200' }, 0.002)
    expect(await m.text()).toContain(
      'svc_http_request_duration_seconds_count{method="GET",route="/healthz",status="200"} 1',
    )
    expect(await m.json()).not.toHaveProperty('svc_http_request_duration_seconds')
  })
})

import { expect, test } from 'bun:test'
import { auditor } from '../../core/audit'
import { Bus } from '../../core/bus'
import type { AuditEntry } from '../../core/events'

test("a handler's audit details past 4 KB keep each large part's field names or its length", async () => {
  const bus = new Bus()
  const heard: AuditEntry[] = []
  bus.on('audit', (e) => void heard.push(e))
  const audit = auditor({ bus, core: { server: { trust_forwarded_for: false } } } as never)
  const caller = { request: new Request('http://localhost/api/v1/rate-limits'), server: null }
  const rules = Array.from({ length: 200 }, (_, i) => ({ match: { game_id: 'x'.repeat(45_000) }, i }))
  const labels = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`l${i}`, 'v']))
  audit(caller, 'rate_limits.put', 'rate_limits', {
    before: { rules },
    after: labels,
    name: 'small',
    note: 'y'.repeat(9_000),
  })
  audit(caller, 'rate_limits.put', 'rate_limits', { after: { name: 'fine' } })
  await Bun.sleep(0)
  expect(heard[0].details).toEqual({
    before: { fields: ['rules'] },
    after: { fields: Array.from({ length: 50 }, (_, i) => `l${i}`), more: 250 },
    name: 'small',
    note: '(9002 characters)',
  })
  expect(JSON.stringify(heard[0].details).length).toBeLessThan(4096)
  expect(heard[1].details).toEqual({ after: { name: 'fine' } })
})

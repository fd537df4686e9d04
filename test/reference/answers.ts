import type { Run } from './harness'
import { type Expected, type Minutes, performanceRange } from './oracle'
import { addDays } from './simulate'

/**
 * Reads every number `oracle.ts` expects through the HTTP API of the running app, under the same
 * names. Returns the numbers and the minutes `/realtime/series` answered for (the oracle needs
 * them: "the last 60 minutes" is relative to when it is read).
 */
export async function readAnswers(run: Run): Promise<{ got: Map<string, number | null>; minutes: Minutes }> {
  const { app, admin, sim } = run
  const g = sim.gameId
  const today = sim.days[sim.days.length - 1]
  const month = `startDate=${sim.days[0]}&endDate=${today}`
  const q = `gameId=${g}&env=prod`
  const got = new Map<string, number | null>()
  const put = (name: string, v: unknown) => got.set(name, v === null || v === undefined ? null : Number(v))
  // biome-ignore lint/suspicious/noExplicitAny: JSON answers, checked by the comparison
  const get = async (path: string): Promise<any> => {
    const r = await app.req('GET', path, { token: admin })
    if (r.status !== 200) throw new Error(`GET ${path} answered ${r.status}: ${JSON.stringify(r.body)}`)
    return r.body
  }
  // biome-ignore lint/suspicious/noExplicitAny: as above
  const post = async (path: string, body: unknown): Promise<any> => {
    const r = await app.req('POST', path, { token: admin, body })
    if (r.status !== 200) throw new Error(`POST ${path} answered ${r.status}: ${JSON.stringify(r.body)}`)
    return r.body
  }

  const dau = await get(`/api/v1/analytics/warehouse/dau?${q}&days=30`)
  for (const p of dau.points) {
    put(`warehouse.dau.${p.date}.dau`, p.dau)
    put(`warehouse.dau.${p.date}.newUsers`, p.newUsers)
  }
  const rev = await get(`/api/v1/analytics/warehouse/revenue?${q}&days=30`)
  let refunds = 0
  let failed = 0
  for (const p of rev.points) {
    put(`warehouse.revenue.${p.date}.revenueCents`, p.revenueCents)
    refunds += p.refundsCents
    failed += p.failed
  }
  put('warehouse.revenue.total.refundsCents', refunds)
  put('warehouse.revenue.total.failed', failed)

  const ov = await get(`/api/v1/analytics/overview?${q}&startDate=${addDays(today, -6)}&endDate=${today}`)
  for (const [k, v] of Object.entries<{ value: number; previous: number }>(ov.metrics)) {
    put(`overview.last7.${k}`, v.value)
    put(`overview.previous7.${k}`, v.previous)
  }

  const ret = await get(`/api/v1/analytics/retention?${q}&${month}&size=30`)
  for (const c of ret.cohorts) for (const n of [1, 7, 30]) put(`retention.${c.cohort}.D${n}`, c.counts[n - 1])

  const weekly = await get(
    `/api/v1/analytics/retention?${q}&startDate=${sim.days[0]}&endDate=${today}&interval=week&size=4`,
  )
  for (const c of weekly.cohorts) {
    put(`retention.week.${c.cohort}.users`, c.users)
    for (let n = 1; n <= 4; n++) put(`retention.week.${c.cohort}.W${n}`, c.counts[n - 1])
  }

  const { from, to } = performanceRange(sim)
  const hours = `env=prod&startDate=${new Date(from).toISOString()}&endDate=${new Date(to).toISOString()}`
  const perf = await get(`/api/analytics/performance/${g}/overview?${hours}`)
  for (const m of ['FPS', 'LAG', 'MEMORY', 'LOAD_TIME']) {
    put(`performance.${m}.avgValue`, perf[m].avgValue)
    put(`performance.${m}.count`, perf[m].count)
  }
  put('performance.CRASH.count', perf.CRASH.count)
  for (const c of await get(`/api/analytics/performance/${g}/crashes?${hours}`)) {
    put(`crashes.${c.crashHash}.count`, c.count)
    put(`crashes.${c.crashHash}.firstSeen`, Date.parse(c.firstSeen))
    put(`crashes.${c.crashHash}.lastSeen`, Date.parse(c.lastSeen))
  }

  const pay = await get(`/api/v1/analytics/payments?${q}&${month}`)
  for (const k of ['revenue', 'refunds', 'failed', 'transactions', 'payingUsers', 'arppu', 'avgTransaction'])
    put(`payments.${k}`, pay[k])

  const gq = `${month}&env=prod`
  const ro = await get(`/api/analytics/revenue/${g}/overview?${gq}`)
  for (const k of ['totalRevenue', 'iapRevenue', 'subscriptionRevenue', 'adRevenue'])
    put(`game.revenue.${k}`, ro[k])
  for (const p of await get(`/api/analytics/revenue/${g}/arpu?${gq}`))
    for (const k of ['arpu', 'arppu', 'payingUsers']) put(`game.arpu.${p.date}.${k}`, p[k])
  for (const p of await get(`/api/analytics/revenue/${g}/by-platform?${gq}`))
    for (const k of ['revenue', 'arpu', 'arppu']) put(`game.byPlatform.${p.platform}.${k}`, p[k])
  const ads = await get(`/api/analytics/ads/${g}/overview?${gq}`)
  for (const k of ['totalRevenue', 'totalImpressions', 'avgEcpm', 'avgFillRate', 'networkCount'])
    put(`game.ads.${k}`, ads[k])
  const ses = await get(`/api/analytics/sessions/${g}/overview?${gq}`)
  for (const k of ['avgSessionDuration', 'avgEventsPerSession', 'avgBounceRate'])
    put(`game.sessions.${k}`, ses[k])

  const so = await get(`/api/analytics/social/${g}/overview?${gq}`)
  for (const k of ['totalFriendships', 'totalGuilds', 'avgViralCoefficient']) put(`social.${k}`, so[k])
  const ri = await get(`/api/analytics/social/${g}/retention-impact?${gq}`)
  for (const k of ['socialUsersD7Retention', 'nonSocialUsersD7Retention', 'retentionLift'])
    put(`social.${k}`, ri[k])

  const beh = await get(`/api/v1/analytics/behavior?${q}&${month}&top=50`)
  put('behavior.totalEvents', beh.totalEvents)
  put('behavior.distinctEvents', beh.distinctEvents)
  for (const e of beh.events) {
    put(`behavior.${e.event}.count`, e.count)
    put(`behavior.${e.event}.users`, e.users)
  }
  const lv = await get(`/api/v1/analytics/levels?${q}&${month}`)
  for (const l of lv.levels)
    for (const k of ['starts', 'completes', 'fails', 'players']) put(`levels.${l.level}.${k}`, l[k])

  const week = { startDate: addDays(today, -6), endDate: today, window: { value: 1, unit: 'hour' } }
  const fo = await post(`/api/v1/analytics/behavior/funnel?${q}`, {
    ...week,
    order: 'ordered',
    steps: [{ event: 'session_start' }, { event: 'shop_open' }, { event: 'payment' }],
  })
  for (const s of fo.steps) put(`funnel.ordered.step${s.step}.users`, s.users)
  const fs = await post(`/api/v1/analytics/behavior/funnel?${q}`, {
    ...week,
    order: 'strict',
    steps: [{ event: 'shop_open' }, { event: 'payment' }, { event: 'session_end' }],
  })
  for (const s of fs.steps) put(`funnel.strict.step${s.step}.users`, s.users)

  const pa = await get(
    `/api/v1/analytics/behavior/paths?${q}&startDate=${week.startDate}&endDate=${today}&by=session&length=3&top=10`,
  )
  put('paths.total', pa.total)
  for (const x of pa.paths) put(`paths.${x.path.join('>')}.count`, x.count)
  const ev = await get(
    `/api/v1/analytics/behavior/events?${q}&startDate=${week.startDate}&endDate=${today}&event=payment&pageSize=1`,
  )
  put('events.payment.total', ev.total)
  const tx = await get(`/api/v1/analytics/payments/transactions?${q}&${month}&pageSize=1`)
  put('transactions.total', tx.total)

  type Point = { minute: string; online: number; events?: number; revenue?: number }
  const total = (xs: Point[], k: 'online' | 'events' | 'revenue') => xs.reduce((t, p) => t + (p[k] ?? 0), 0)
  const rt: { points: Point[] } = await get(`/api/v1/analytics/realtime/series?${q}&minutes=60`)
  put('realtime.events', total(rt.points, 'events'))
  put('realtime.revenue', Math.round(total(rt.points, 'revenue') * 100) / 100)
  put('realtime.onlineMinutes', total(rt.points, 'online'))
  const on: { points: Point[] } = await get(`/api/v1/analytics/warehouse/online?${q}&minutes=60`)
  put('warehouse.online.onlineMinutes', total(on.points, 'online'))
  const minutes = {
    series: rt.points.map((p) => Date.parse(p.minute)),
    online: on.points.map((p) => Date.parse(p.minute)),
  }

  const inv = await get(`/api/v1/analytics/invocations/summary?${q}&hours=720`)
  for (const k of ['total', 'failed', 'successRate', 'avgDurationMs']) put(`invocations.${k}`, inv[k])
  for (const f of inv.topFunctions)
    for (const k of ['total', 'failed', 'avgDurationMs']) put(`invocations.${f.functionId}.${k}`, f[k])

  const ad = await get(`/api/v1/analytics/behavior/adoption?${q}&${month}`)
  put('adoption.activeUsers', ad.activeUsers)
  for (const f of ad.features) {
    put(`adoption.${f.feature}.users`, f.users)
    put(`adoption.${f.feature}.uses`, f.uses)
  }
  const pt = await get(`/api/v1/analytics/payments/product-trend?${q}&${month}`)
  for (const p of pt.products)
    for (const k of ['revenue', 'transactions', 'refunds']) put(`products.${p.productId}.${k}`, p[k])
  return { got, minutes }
}

/** Whether an answer equals the reference: exactly, or to the precision `compare` names (HLL counts within their documented error). */
export function within(e: Expected, got: number | null | undefined): boolean {
  if (got === undefined) return false
  if (e.value === null || got === null) return e.value === got
  const d = Math.abs(got - e.value)
  switch (e.compare) {
    case 'exact':
      return d === 0
    case 'ratio':
      return d <= 0.00005 + 1e-9
    case 'milli':
      return d <= 0.0005 + 1e-9
    case 'avg':
      return d <= 0.005 + 1e-9
    case 'hll':
      return d <= Math.max(2, 0.032 * e.value)
    case 'hll-ratio':
      return d <= 0.032 * Math.abs(e.value) + 0.00005
  }
}

/**
 * The expected numbers of the simulated month (issue 35 point 3), computed in plain TypeScript
 * from the list `simulate.ts` sends, by the rules of spec 1 and docs/analytics.md only: nothing
 * here imports from plugins/ (a shared mistake would otherwise cancel out). Each number has a
 * name (`route.detail`), its expected value and how it is compared:
 *
 * - `exact`: counts and sums of money (cents), equal.
 * - `ratio` / `milli` / `avg`: the API answers ratios to 4 decimals, performance averages to 3
 *   and other averages and money to 2, so equal to that precision (within half its last digit).
 * - `hll`: distinct users the code counts with a HyperLogLog sketch (docs/analytics.md,
 *   "Distinct users ... within about 1.6%"; plugins' hll.ts: 2^12 registers, standard error
 *   1.04/sqrt(4096) = 1.6%). The month is seeded, so a sketch's estimate is the same every run;
 *   the bound is two standard errors (3.2%) or 2 users, whichever is more. A complete sketch of
 *   each set this month estimates within 1.7% (checked with the same sketch over the exact sets:
 *   the worst, 118 for 120 heartbeat users); a sketch missing updates falls outside.
 * - `hll-ratio`: a ratio over such a count, within 3.2% of its value.
 */
import {
  ACTIVE,
  type Compare,
  type Ev,
  type Expected,
  type Minutes,
  ONLINE,
  attr,
  cents,
  dayList,
  div,
  funnel,
  money,
  paths,
  performanceRange,
  store,
  sum,
} from './oracle-rules'
import { type Simulation, addDays, localMidnight } from './simulate'

export type { Compare, Expected, Minutes }
export { performanceRange, store }

/** Every expected number of the month. */
export function expectedNumbers(sim: Simulation, minutes: Minutes): Expected[] {
  const s = store(sim)
  const out: Expected[] = []
  const put = (name: string, value: number | null, compare: Compare = 'exact') =>
    out.push({ name, value, compare })
  const today = sim.days[sim.days.length - 1]
  const inDays = (from: string, to: string) => s.events.filter((e) => e.day >= from && e.day <= to)
  const month = inDays(sim.days[0], today)

  // Active users per local day (login or session_start; docs: "DAU from login and session_start").
  const activeOn = new Map<string, Set<string>>()
  for (const e of s.events)
    if (ACTIVE.has(e.event) && e.uid) {
      const set = activeOn.get(e.day) ?? new Set<string>()
      set.add(e.uid)
      activeOn.set(e.day, set)
    }
  const active = (d: string, u: string) => activeOn.get(d)?.has(u) ?? false
  const activeIn = (from: string, to: string) => {
    const all = new Set<string>()
    for (let d = from; d <= to; d = addDays(d, 1)) for (const u of activeOn.get(d) ?? []) all.add(u)
    return all
  }
  const cohort = new Map<string, string[]>()
  for (const [u, d] of s.firstDay) cohort.set(d, [...(cohort.get(d) ?? []), u])
  const success = (from: string, to: string) =>
    s.payments.filter((p) => p.day >= from && p.day <= to && attr(p, 'status') === 'success')

  // GET /warehouse/dau?days=30: per local day, DAU and users first seen.
  for (const d of sim.days) {
    put(`warehouse.dau.${d}.dau`, activeOn.get(d)?.size ?? 0)
    put(`warehouse.dau.${d}.newUsers`, cohort.get(d)?.length ?? 0)
  }

  // GET /warehouse/revenue?days=30: successful payments per local day; refunds and failures over the month.
  for (const d of sim.days) put(`warehouse.revenue.${d}.revenueCents`, sum(success(d, d).map(cents)))
  const refunded = s.payments.filter((p) => attr(p, 'status') === 'refunded')
  const failed = s.payments.filter((p) => attr(p, 'status') === 'failed')
  put('warehouse.revenue.total.refundsCents', sum(refunded.map(cents)))
  put('warehouse.revenue.total.failed', failed.length)

  // GET /overview for the last 7 days against the 7 before (docs/analytics.md; server-routes'
  // OpenAPI text: dau the average daily actives, mau distinct users of the 30 days ending with the
  // period, arpu = revenue / active users of the period, d1 = first seen in the period but its
  // last day, active the next day).
  const overview = (from: string, to: string, tag: string) => {
    const days = dayList(from, to)
    put(`overview.${tag}.dau`, sum(days.map((d) => activeOn.get(d)?.size ?? 0)) / days.length, 'avg')
    put(`overview.${tag}.mau`, activeIn(addDays(to, -29), to).size, 'hll')
    put(`overview.${tag}.newUsers`, sum(days.map((d) => cohort.get(d)?.length ?? 0)))
    const pays = success(from, to)
    const revenue = sum(pays.map(cents))
    const payers = new Set(pays.map((p) => p.uid))
    put(`overview.${tag}.revenue`, money(revenue), 'avg')
    put(`overview.${tag}.arpu`, div(revenue / 100, activeIn(from, to).size), 'hll-ratio')
    put(`overview.${tag}.arppu`, div(revenue / 100, payers.size), 'ratio')
    put(`overview.${tag}.payingUsers`, payers.size)
    let base = 0
    let kept = 0
    for (const d of days.slice(0, -1))
      for (const u of cohort.get(d) ?? []) {
        base++
        if (active(addDays(d, 1), u)) kept++
      }
    put(`overview.${tag}.d1Retention`, div(kept, base), 'ratio')
  }
  overview(addDays(today, -6), today, 'last7')
  overview(addDays(today, -13), addDays(today, -7), 'previous7')

  // GET /retention?size=30 (days): per cohort D1, D7, D30; an offset whose day has not come is null.
  for (const d of sim.days)
    for (const n of [1, 7, 30]) {
      const day = addDays(d, n)
      const users = cohort.get(d) ?? []
      put(`retention.${d}.D${n}`, day > today ? null : users.filter((u) => active(day, u)).length)
    }

  // GET /retention?interval=week&size=4: cohorts by the local week (from Monday) of first sight;
  // Wn = the cohort's users active in the n-th week after; a week that has not begun is null.
  const monday = (d: string) => addDays(d, -((new Date(`${d}T00:00:00Z`).getUTCDay() + 6) % 7))
  const weeks = [...new Set(sim.days.map(monday))]
  for (const w of weeks) {
    const users = [...s.firstDay].filter(([, d]) => monday(d) === w).map(([u]) => u)
    put(`retention.week.${w}.users`, users.length)
    for (let n = 1; n <= 4; n++) {
      const from = addDays(w, 7 * n)
      const days = dayList(from, addDays(from, 6))
      put(
        `retention.week.${w}.W${n}`,
        from > today ? null : users.filter((u) => days.some((d) => active(d, u))).length,
      )
    }
  }

  // Performance over the month (the range in hours, from the first local midnight to the hour after
  // now): per metric the mean value and count of `perf` events; crashes by hash, first and last seen.
  const { from: perfFrom, to: perfTo } = performanceRange(sim)
  const perfEvents = s.events.filter((e) => e.ms >= perfFrom && e.ms < perfTo)
  for (const metric of ['FPS', 'LAG', 'MEMORY', 'LOAD_TIME']) {
    const xs = perfEvents.filter((e) => e.event === 'perf' && attr(e, 'metric') === metric)
    put(
      `performance.${metric}.avgValue`,
      div(sum(xs.map((e) => Number(attr(e, 'value')))), xs.length),
      'milli',
    )
    put(`performance.${metric}.count`, xs.length)
  }
  const crashes = perfEvents.filter((e) => e.event === 'crash')
  put('performance.CRASH.count', crashes.length)
  for (const h of [...new Set(crashes.map((e) => String(attr(e, 'crashHash'))))].sort()) {
    const xs = crashes.filter((e) => attr(e, 'crashHash') === h).map((e) => e.ms)
    put(`crashes.${h}.count`, xs.length)
    put(`crashes.${h}.firstSeen`, Math.min(...xs))
    put(`crashes.${h}.lastSeen`, Math.max(...xs))
  }

  // Social over the month (docs/analytics.md): friendships (friend_add) and guild joins, and the
  // viral coefficient = users invited per active user, per day, averaged over the days with users.
  // Retention impact: the users first seen in the range whose day 7 has come (cohort <= today - 7),
  // split by whether they ever did anything social; D7 = active on cohort + 7 days.
  put('social.totalFriendships', month.filter((e) => e.event === 'friend_add').length)
  put('social.totalGuilds', month.filter((e) => e.event === 'guild_join').length)
  const perDay = sim.days
    .filter((d) => (activeOn.get(d)?.size ?? 0) > 0)
    .map(
      (d) =>
        sum(
          inDays(d, d)
            .filter((e) => e.event === 'invite')
            .map((e) => (attr(e, 'invited') as unknown[]).length),
        ) / (activeOn.get(d)?.size ?? 1),
    )
  put('social.avgViralCoefficient', div(sum(perDay), perDay.length), 'ratio')
  const social = new Set(
    s.events
      .filter((e) => ['friend_add', 'guild_join', 'invite'].includes(e.event) && e.uid)
      .map((e) => e.uid),
  )
  const d7 = (isSocial: boolean) => {
    let base = 0
    let kept = 0
    for (const [u, d] of s.firstDay)
      if (d <= addDays(today, -7) && social.has(u) === isSocial) {
        base++
        if (active(addDays(d, 7), u)) kept++
      }
    return div(kept, base)
  }
  put('social.socialUsersD7Retention', d7(true), 'ratio')
  put('social.nonSocialUsersD7Retention', d7(false), 'ratio')
  put('social.retentionLift', d7(false) ? d7(true) / d7(false) - 1 : 0, 'ratio')

  // GET /payments over the month: revenue, refunds, failed, transactions, paying users, ARPPU, average transaction.
  const pays = success(sim.days[0], today)
  const revenue = sum(pays.map(cents))
  const payers = new Set(pays.map((p) => p.uid))
  put('payments.revenue', money(revenue), 'avg')
  put('payments.refunds', money(sum(refunded.map(cents))), 'avg')
  put('payments.failed', failed.length)
  put('payments.transactions', pays.length)
  put('payments.payingUsers', payers.size)
  put('payments.arppu', div(revenue / 100, payers.size), 'ratio')
  put('payments.avgTransaction', div(revenue / 100, pays.length), 'ratio')

  // Game analytics: revenue overview (total = iap + subscription + ads; spec 1 and docs), per day
  // paying users, per platform revenue and ARPU (users of the range on that platform).
  const adMicros = sum(
    month.filter((e) => e.event === 'ad_impression').map((e) => Math.round(Number(attr(e, 'revenue')) * 1e6)),
  )
  const iap = sum(pays.filter((p) => attr(p, 'kind') !== 'subscription').map(cents))
  const sub = sum(pays.filter((p) => attr(p, 'kind') === 'subscription').map(cents))
  put('game.revenue.totalRevenue', (iap + sub) / 100 + adMicros / 1e6, 'avg')
  put('game.revenue.iapRevenue', money(iap), 'avg')
  put('game.revenue.subscriptionRevenue', money(sub), 'avg')
  put('game.revenue.adRevenue', adMicros / 1e6, 'avg')
  // Per day: ARPU = the day's total revenue (payments and ads) / its DAU, ARPPU = the same / its paying users.
  for (const d of sim.days) {
    const dayPayers = new Set(success(d, d).map((p) => p.uid)).size
    const dayAds = sum(
      inDays(d, d)
        .filter((e) => e.event === 'ad_impression')
        .map((e) => Math.round(Number(attr(e, 'revenue')) * 1e6)),
    )
    const dayRevenue = sum(success(d, d).map(cents)) / 100 + dayAds / 1e6
    put(`game.arpu.${d}.arpu`, div(dayRevenue, activeOn.get(d)?.size ?? 0), 'ratio')
    put(`game.arpu.${d}.arppu`, div(dayRevenue, dayPayers), 'ratio')
    put(`game.arpu.${d}.payingUsers`, dayPayers)
  }
  for (const platform of ['ANDROID', 'IOS', 'WEB']) {
    const rev = sum(pays.filter((p) => attr(p, 'platform') === platform).map(cents))
    const users = new Set(
      month.filter((e) => e.event === 'session_start' && attr(e, 'platform') === platform).map((e) => e.uid),
    )
    const platformPayers = new Set(pays.filter((p) => attr(p, 'platform') === platform).map((p) => p.uid))
    put(`game.byPlatform.${platform}.revenue`, money(rev), 'avg')
    put(`game.byPlatform.${platform}.arpu`, div(rev / 100, users.size), 'ratio')
    put(`game.byPlatform.${platform}.arppu`, div(rev / 100, platformPayers.size), 'ratio')
  }

  // Ads: revenue, impressions, eCPM = revenue / impressions x 1000, fill rate = filled / requested.
  const imps = month.filter((e) => e.event === 'ad_impression')
  const reqs = month.filter((e) => e.event === 'ad_request')
  put('game.ads.totalRevenue', adMicros / 1e6, 'avg')
  put('game.ads.totalImpressions', imps.length)
  put('game.ads.avgEcpm', div(adMicros / 1e6, imps.length) * 1000, 'ratio')
  put(
    'game.ads.avgFillRate',
    div(reqs.filter((e) => attr(e, 'filled') === true).length, reqs.length),
    'ratio',
  )
  put('game.ads.networkCount', new Set([...imps, ...reqs].map((e) => attr(e, 'network'))).size)

  // Sessions (session_end): mean duration, mean events, bounce rate = share with exactly one event.
  const ends = month.filter((e) => e.event === 'session_end')
  put(
    'game.sessions.avgSessionDuration',
    div(sum(ends.map((e) => Number(attr(e, 'duration_ms')))), ends.length),
    'avg',
  )
  put(
    'game.sessions.avgEventsPerSession',
    div(sum(ends.map((e) => Number(attr(e, 'events')))), ends.length),
    'avg',
  )
  put(
    'game.sessions.avgBounceRate',
    div(ends.filter((e) => Number(attr(e, 'events')) === 1).length, ends.length),
    'ratio',
  )

  // GET /behavior over the month: every event name's count and distinct users; totals.
  const names = new Map<string, { count: number; users: Set<string> }>()
  for (const e of month) {
    const x = names.get(e.event) ?? { count: 0, users: new Set<string>() }
    x.count++
    if (e.uid) x.users.add(e.uid)
    names.set(e.event, x)
  }
  put('behavior.totalEvents', month.length)
  put('behavior.distinctEvents', names.size)
  for (const [name, x] of [...names].sort()) {
    put(`behavior.${name}.count`, x.count)
    put(`behavior.${name}.users`, x.users.size, 'hll')
  }

  // GET /levels over the month: per level starts, completes, fails, players (users with any event of it).
  const levels = new Map<string, { starts: number; completes: number; fails: number; players: Set<string> }>()
  for (const e of month) {
    if (!e.event.startsWith('level_')) continue
    const l = String(attr(e, 'level'))
    const x = levels.get(l) ?? { starts: 0, completes: 0, fails: 0, players: new Set<string>() }
    if (e.event === 'level_start') x.starts++
    if (e.event === 'level_complete') x.completes++
    if (e.event === 'level_fail') x.fails++
    if (e.uid) x.players.add(e.uid)
    levels.set(l, x)
  }
  for (const [l, x] of [...levels].sort()) {
    put(`levels.${l}.starts`, x.starts)
    put(`levels.${l}.completes`, x.completes)
    put(`levels.${l}.fails`, x.fails)
    put(`levels.${l}.players`, x.players.size, 'hll')
  }

  // POST /behavior/funnel over the last 7 days (see funnel()).
  const week = inDays(addDays(today, -6), today)
  const weekEnd = localMidnight(addDays(today, 1))
  const ordered = funnel(week, ['session_start', 'shop_open', 'payment'], 3_600_000, 'ordered', weekEnd)
  ordered.forEach((n, i) => put(`funnel.ordered.step${i + 1}.users`, n))
  const strict = funnel(week, ['shop_open', 'payment', 'session_end'], 3_600_000, 'strict', weekEnd)
  strict.forEach((n, i) => put(`funnel.strict.step${i + 1}.users`, n))

  // GET /behavior/paths over the last 7 days, by session, 3 steps: the top 10 and how many paths.
  const p = paths(week, 3, weekEnd)
  put('paths.total', p.total)
  for (const [path, n] of p.counts.slice(0, 10)) put(`paths.${path.join('>')}.count`, n)
  // GET /behavior/events?event=payment over the last 7 days: raw payment events (each order and status once).
  put('events.payment.total', week.filter((e) => e.event === 'payment').length)
  // GET /payments/transactions over the month: each order and status once.
  put('transactions.total', s.payments.filter((e) => e.day >= sim.days[0] && e.day <= today).length)

  // GET /realtime/series: per minute of event time, events, distinct online users, successful revenue.
  const first = minutes.series[0]
  const last = minutes.series[minutes.series.length - 1] + 60_000
  const recent = s.events.filter((e) => e.ms >= first && e.ms < last)
  put('realtime.events', recent.length)
  put(
    'realtime.revenue',
    money(sum(recent.filter((e) => e.event === 'payment' && attr(e, 'status') === 'success').map(cents))),
    'avg',
  )
  // Online: per minute the distinct users with heartbeat or session_start, summed over the minutes.
  const online = (ms: number[]) =>
    sum(
      ms.map(
        (m) =>
          new Set(
            s.events
              .filter((e) => ONLINE.has(e.event) && e.uid && e.ms >= m && e.ms < m + 60_000)
              .map((e) => e.uid),
          ).size,
      ),
    )
  put('realtime.onlineMinutes', online(minutes.series), 'hll')
  put('warehouse.online.onlineMinutes', online(minutes.online), 'hll')

  // GET /invocations/summary?hours=720: function.invoke events of the last 30 days.
  const inv = s.events.filter((e) => e.event === 'function.invoke')
  const dur = (xs: Ev[]) => div(sum(xs.map((e) => Number(attr(e, 'durationMs')))), xs.length)
  const bad = (xs: Ev[]) => xs.filter((e) => attr(e, 'outcome') === 'failure').length
  put('invocations.total', inv.length)
  put('invocations.failed', bad(inv))
  put('invocations.successRate', div(inv.length - bad(inv), inv.length), 'ratio')
  put('invocations.avgDurationMs', dur(inv), 'avg')
  for (const fn of [...new Set(inv.map((e) => String(attr(e, 'functionId'))))].sort()) {
    const xs = inv.filter((e) => attr(e, 'functionId') === fn)
    put(`invocations.${fn}.total`, xs.length)
    put(`invocations.${fn}.failed`, bad(xs))
    put(`invocations.${fn}.avgDurationMs`, dur(xs), 'avg')
  }

  // GET /behavior/adoption over the month: active users (active, with every feature user), per feature users and uses.
  const uses = month.filter((e) => e.event === 'feature_use')
  const adoptionActive = activeIn(sim.days[0], today)
  for (const e of uses) if (e.uid) adoptionActive.add(e.uid)
  put('adoption.activeUsers', adoptionActive.size, 'hll')
  for (const f of [...new Set(uses.map((e) => String(attr(e, 'feature'))))].sort()) {
    const xs = uses.filter((e) => attr(e, 'feature') === f)
    put(`adoption.${f}.users`, new Set(xs.map((e) => e.uid)).size, 'hll')
    put(`adoption.${f}.uses`, xs.length)
  }

  // GET /payments/product-trend over the month: per product revenue, transactions, refunds.
  for (const p of [...new Set(s.payments.map((e) => String(attr(e, 'product_id'))))].sort()) {
    const ok = pays.filter((e) => attr(e, 'product_id') === p)
    put(`products.${p}.revenue`, money(sum(ok.map(cents))), 'avg')
    put(`products.${p}.transactions`, ok.length)
    put(
      `products.${p}.refunds`,
      money(sum(refunded.filter((e) => attr(e, 'product_id') === p).map(cents))),
      'avg',
    )
  }
  return out
}

import { expect, test } from 'bun:test'
import type { Attrs } from './client'
import { EVENTS, GameEvents, type Tracker } from './events'

/** Records what the helpers hand the client, as the client would queue it. */
function recorder() {
  const sent: Array<
    { event: string; attrs?: Attrs; ts?: number } | { payment: Parameters<Tracker['payment']>[0] }
  > = []
  const tracker: Tracker = {
    track: (event, attrs, ts) => void sent.push({ event, attrs, ts }),
    payment: (p) => void sent.push({ payment: p }),
  }
  return { sent, events: new GameEvents(tracker) }
}

test('each helper sends its event name with the attributes the analytics read; absent options stay absent', () => {
  const { sent, events } = recorder()
  events.sessionStart({ sessionId: 's-7', platform: 'IOS' }, 1000)
  events.sessionEnd({ sessionId: 's-7', durationMs: 64_000, events: 1 })
  events.purchase({
    orderId: 'o-3',
    kind: 'subscription',
    amountCents: 999,
    currency: 'EUR',
    productId: 'vip',
  })
  events.adRequest({ network: 'admob', filled: false })
  events.adImpression({ network: 'unity', revenue: 0.0125, placement: 'end' })
  events.perf({ metric: 'LOAD_TIME', value: 1830 })
  events.crash({ crashHash: 'c0ffee' })
  events.friendAdd({ friendId: 'u-9' })
  events.guildJoin({ guildId: 'g-1' })
  events.invite({ invited: ['u-2', 'u-3'] })
  events.levelStart({ level: 4, episode: 'e1', map: 'forest' })
  events.levelComplete({ level: 4, durationMs: 12_000 })
  events.levelFail({ level: 5, map: 'cave', x: 12, y: -3 })
  events.featureUse({ feature: 'crafting' })
  expect(sent).toEqual([
    { event: 'session_start', attrs: { session_id: 's-7', platform: 'IOS' }, ts: 1000 },
    { event: 'session_end', attrs: { session_id: 's-7', duration_ms: 64_000, events: 1 }, ts: undefined },
    {
      payment: {
        orderId: 'o-3',
        status: 'success',
        amountCents: 999,
        currency: 'EUR',
        attrs: { kind: 'subscription', product_id: 'vip' },
      },
    },
    { event: 'ad_request', attrs: { network: 'admob', filled: false }, ts: undefined },
    { event: 'ad_impression', attrs: { network: 'unity', revenue: 0.0125, placement: 'end' }, ts: undefined },
    { event: 'perf', attrs: { metric: 'LOAD_TIME', value: 1830 }, ts: undefined },
    { event: 'crash', attrs: { crashHash: 'c0ffee' }, ts: undefined },
    { event: 'friend_add', attrs: { friend_id: 'u-9' }, ts: undefined },
    { event: 'guild_join', attrs: { guild_id: 'g-1' }, ts: undefined },
    { event: 'invite', attrs: { invited: ['u-2', 'u-3'] }, ts: undefined },
    { event: 'level_start', attrs: { level: '4', episode: 'e1', map: 'forest' }, ts: undefined },
    { event: 'level_complete', attrs: { level: '4', duration_ms: 12_000 }, ts: undefined },
    { event: 'level_fail', attrs: { level: '5', map: 'cave', x: 12, y: -3 }, ts: undefined },
    { event: 'feature_use', attrs: { feature: 'crafting' }, ts: undefined },
  ])
  // Every name of the vocabulary has its helper.
  const names = new Set(sent.map((s) => ('event' in s ? s.event : 'payment')))
  expect([...names].sort()).toEqual(Object.values(EVENTS).sort())
})

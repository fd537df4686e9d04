import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, forEachEngine } from '../../../test/helpers'
import { DAY, ingestApp, signed } from '../../ingest/testing'

/**
 * Social retention impact counts only cohorts whose day 7 has passed, as `/retention` does (it
 * shows such cells as null): a user first seen three days ago cannot have come back on day 7 yet
 * and must not count as lost (issue 35 point 6). The game is in UTC; days are counted from today.
 */
forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  const today = Math.floor(Date.now() / DAY) * DAY
  const ev = (event: string, uid: string, day: number, extra: Record<string, unknown> = {}) => ({
    event,
    uid,
    ts: String(day + 10 * 3_600_000),
    game_id: gameId,
    env: 'prod',
    ...extra,
  })

  beforeAll(async () => {
    ;({ a, admin, gameId } = await ingestApp(engine))
    const old = today - 10 * DAY
    const recent = today - 3 * DAY
    const events = [
      // Cohort of 10 days ago (its day 7 has passed): social s1 s2, s1 back on day 7; others n1 n2, n1 back.
      ev('session_start', 's1', old),
      ev('friend_add', 's1', old, { attrs: { friend_id: 's2' } }),
      ev('session_start', 's2', old),
      ev('guild_join', 's2', old, { attrs: { guild_id: 'g1' } }),
      ev('session_start', 'n1', old),
      ev('session_start', 'n2', old),
      ev('session_start', 's1', old + 7 * DAY),
      ev('session_start', 'n1', old + 7 * DAY),
      // Cohort of 3 days ago (day 7 still ahead): social s3, others n3 n4; none can be back on day 7 yet.
      ev('session_start', 's3', recent),
      ev('friend_add', 's3', recent, { attrs: { friend_id: 'n3' } }),
      ev('session_start', 'n3', recent),
      ev('session_start', 'n4', recent),
    ]
    expect((await signed(a, '/api/ingest/events', events)).status).toBe(200)
  })
  afterAll(() => a.stop())

  test('social 1/2, non-social 1/2, lift 0: the cohort of 3 days ago is not counted', async () => {
    const from = new Date(today - 20 * DAY).toISOString().slice(0, 10)
    const to = new Date(today).toISOString().slice(0, 10)
    const r = await a.req(
      'GET',
      `/api/analytics/social/${gameId}/retention-impact?startDate=${from}&endDate=${to}`,
      {
        token: admin,
      },
    )
    expect(r.status).toBe(200)
    // Counting the recent cohort as lost would give social 1/3 and non-social 1/4.
    expect(r.body).toEqual({ socialUsersD7Retention: 0.5, nonSocialUsersD7Retention: 0.5, retentionLift: 0 })
  })
})

import { expect, test } from 'bun:test'
import { signRequest } from '../../../sdk/sign'
import { clearOfMinute } from '../../helpers'
import { PHONE } from '../driver'
import { FLOW, SECRET, type World } from '../world'

/** The analytics pages as an analyst reads them, over the players the experiment flow sent. */
export function analyticsFlows(w: () => World): void {
  test(
    'overview against the previous period, retention heat map by day and week',
    async () => {
      const { tab, a } = w()
      const page = tab.page
      await tab.go('#/analytics/overview', 'Analytics overview')
      const dau = page.locator('.kpi').filter({ hasText: 'Daily active users' })
      await dau.getByText(/before:/).waitFor()
      const api = (
        await a.req('GET', `/api/v1/analytics/overview?gameId=${w().gameId}&env=prod`, {
          token: await a.token('analyst'),
        })
      ).body
      expect(
        await page
          .locator('.kpi')
          .filter({ hasText: 'Monthly active users' })
          .locator('.kpi-value')
          .textContent(),
      ).toBe(api.metrics.mau.value.toLocaleString('en'))
      await page
        .getByRole('figure')
        .filter({ hasText: 'Daily active and new users' })
        .locator('canvas')
        .first()
        .waitFor()
      await tab.done('analytics-overview')
      await page.getByLabel('Period').selectOption('30')
      await page.getByText(/ to .*, against /).waitFor()

      await tab.go('#/analytics/retention', 'Retention')
      const matrix = page.getByRole('table', { name: /new players who came back/ })
      await matrix.waitFor()
      expect(await matrix.locator('tbody tr').count()).toBeGreaterThan(5)
      expect(
        await matrix
          .locator('tbody td')
          .filter({ hasText: /^\d+%$/ })
          .count(),
      ).toBeGreaterThan(20)
      await tab.done('analytics-retention', false)
      await page.getByLabel('Cohorts by').selectOption('week')
      await page.getByRole('columnheader', { name: 'Week 1', exact: true }).waitFor()
      expect(await page.getByRole('columnheader', { name: 'Week 9', exact: true }).count()).toBe(0)
      tab.checkErrors()
    },
    FLOW,
  )

  test(
    'funnel builder, paths, revenue, ads, sessions',
    async () => {
      const { tab } = w()
      const page = tab.page
      await tab.go('#/analytics/funnel', 'Funnels')
      await page.getByLabel('Step 3 event').fill('')
      await page.getByRole('button', { name: 'Remove step 3' }).click()
      await page.getByRole('button', { name: 'Show funnel' }).click()
      await page.getByText(/players went all the way/).waitFor()
      await page.getByRole('button', { name: 'Add a step' }).click()
      await page.getByLabel('Step 3 event').fill('level_complete')
      await page.getByLabel('Events of').selectOption('168')
      await page.getByRole('button', { name: 'Show funnel' }).click()
      await page
        .getByRole('table', { name: 'Steps' })
        .getByRole('cell', { name: '3. level_complete' })
        .waitFor()
      await tab.done('analytics-funnel')

      await tab.go('#/analytics/paths', 'Paths')
      await page.locator('ol.paths li').first().waitFor()
      expect(await page.locator('ol.paths li').first().textContent()).toContain('session_start')
      await tab.done('analytics-paths')

      await tab.go('#/analytics/revenue', 'Revenue')
      await page.locator('.kpi').filter({ hasText: 'Total revenue' }).getByText('€').waitFor()
      await page.getByRole('table', { name: 'Revenue by platform' }).waitFor()
      await tab.done('analytics-revenue')
      await tab.go('#/analytics/ads', 'Ads')
      await page.getByRole('table', { name: 'Ad networks' }).getByRole('cell', { name: 'admob' }).waitFor()
      await tab.done('analytics-ads')
      await tab.go('#/analytics/sessions', 'Sessions')
      await page
        .locator('.kpi')
        .filter({ hasText: 'Average session' })
        .getByText(/min|s$/)
        .waitFor()
      await tab.done('analytics-sessions')
    },
    FLOW,
  )

  test(
    'levels with the death heat map; realtime over server-sent events, on a phone too',
    async () => {
      const { tab } = w()
      const page = tab.page
      await tab.go('#/analytics/levels', 'Levels')
      await page.getByRole('table', { name: 'Pass rate per level' }).waitFor()
      const map = page.getByRole('img', { name: /^Deaths on map-\d: \d+ deaths in a 16 by 16 grid/ })
      await map.waitFor()
      expect(await map.locator('rect').count()).toBe(256)
      await tab.done('analytics-levels')

      await tab.go('#/analytics/realtime', 'Realtime')
      await page.getByText(/^Live/).waitFor()
      const online = page.locator('.kpi').filter({ hasText: 'Online now' })
      await online.waitFor()
      // A player arrives now: the next snapshot (every half second here) counts them. "Events
      // this minute" starts again at each minute, so it is read, sent and counted inside one: a
      // minute that begins in between holds the 5 alone, and the wait below would run out.
      await clearOfMinute(10_000)
      const before = Number(
        await page
          .locator('.kpi')
          .filter({ hasText: 'Events this minute' })
          .locator('.kpi-value')
          .textContent(),
      )
      const body = JSON.stringify(
        Array.from({ length: 5 }, (_, i) => ({
          event: 'session_start',
          ts: String(Date.now()),
          game_id: w().gameId,
          env: 'prod',
          uid: `live-${i}`,
        })),
      )
      const res = await fetch(`${w().base}/api/ingest/events`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(await signRequest(SECRET, body)) },
        body,
      })
      expect(res.status).toBe(200)
      await page.waitForFunction(
        (n) =>
          Number(document.querySelector('.kpi:nth-child(3) .kpi-value')?.textContent?.replace(/,/g, '')) >=
          n + 5,
        before,
      )
      await tab.done('analytics-realtime')
      await page.setViewportSize(PHONE)
      await page.getByRole('button', { name: 'Menu' }).waitFor()
      expect(await tab.overflowsSideways()).toBe(false)
      await tab.done('phone-realtime', false)
      await page.setViewportSize({ width: 1280, height: 860 })
    },
    FLOW,
  )
}

import { expect, test } from 'bun:test'
import { gameEvents } from '../events'
import { ingest } from '../ingest'
import { FLOW, SECRET, type World } from '../world'

/**
 * Experiments: the variant editor's checks, create, publish; then the game's players arrive
 * (signed ingestion, as game clients send them) and the results show uplift, interval and SRM.
 */
export function experimentFlows(w: () => World): void {
  test(
    'experiments: the editor checks the weights; create, publish, results with uplift, interval and SRM; pause',
    async () => {
      const { tab, a } = w()
      const page = tab.page
      await tab.choose('Star Miners')
      await tab.go('#/experiments', 'Experiments')
      await page.getByText('No experiment in Star Miners / prod.').waitFor()
      await page.getByRole('button', { name: 'New experiment' }).click()
      await page.getByRole('textbox', { name: 'Name', exact: true }).fill('Shop layout')
      await page.getByLabel('Primary metric (event)').fill('shop_purchase')
      await page.getByLabel('Secondary metrics').fill('level_complete')
      await page.getByLabel('Variant 1 weight').fill('60')
      await page.getByLabel('Variant 2 weight').fill('30')
      await page.getByText('Weights add up to 90, not 100.').waitFor()
      await page.getByRole('button', { name: 'Add a variant' }).click()
      await page.getByLabel('Variant 3 name').fill('treatment')
      await page.getByText(/Variant names must be different\..*Every weight must be above 0\./).waitFor()
      await page.getByRole('button', { name: 'Create as draft' }).click()
      // Refused by the console before the API is asked: still no experiment.
      expect((await a.req('GET', '/api/experiments', { token: await a.token('admin') })).body.total).toBe(0)
      await page.getByRole('button', { name: 'Remove variant 3' }).click()
      await page.getByRole('button', { name: 'Split evenly' }).click()
      await page.getByText('Weights add up to 100: ready to run.').waitFor()
      await tab.done('experiment-new')
      await page.getByRole('button', { name: 'Create as draft' }).click()
      await page.getByRole('heading', { level: 1, name: 'Shop layout' }).waitFor()
      const id = page.url().split('#/experiments/')[1]
      w().experimentId = id
      await page.getByText('No player has been exposed yet').waitFor()
      await page.getByRole('button', { name: 'Publish (start)' }).click()
      await page.getByText('Running.').waitFor()

      await ingest(
        w().base,
        SECRET,
        gameEvents({ gameId: w().gameId!, users: 300, days: 21, experimentId: id }),
      )
      await tab.go('#/experiments')
      await tab.go(`#/experiments/${id}`, 'Shop layout')
      await page.getByRole('table', { name: 'Conversion to shop_purchase' }).waitFor()
      const row = page
        .getByRole('table', { name: 'Conversion to shop_purchase' })
        .getByRole('row')
        .filter({ hasText: 'treatment' })
      expect(await row.textContent()).toMatch(/[+-]\d+\.\d%.*[+-]\d+\.\d% to [+-]\d+\.\d%/)
      await page
        .getByText(/No sample ratio mismatch|Sample ratio mismatch/)
        .first()
        .waitFor()
      const results = (
        await a.req('GET', `/api/experiments/${id}/results`, { token: await a.token('admin') })
      ).body
      const shown = await page.getByRole('table', { name: /^Exposures/ }).textContent()
      expect(shown).toContain(String(results.exposures[0].exposures))
      await page
        .getByRole('heading', { name: 'Results' })
        .evaluate((h) => window.scrollTo(0, h.getBoundingClientRect().top + window.scrollY - 70))
      await tab.done('experiment-results', false)
      await page.getByRole('button', { name: 'Pause' }).click()
      await page.getByText('Paused.').waitFor()
      await page.getByRole('button', { name: 'Resume' }).click()
      await page.getByText('Running.').waitFor()
      tab.checkErrors()
    },
    FLOW,
  )

  test(
    'an analyst reads the results but is offered no publish, pause or edit',
    async () => {
      const { tab } = w()
      const page = tab.page
      await tab.signOut()
      await tab.signIn('analyst@test.local')
      await tab.choose('Star Miners')
      await tab.go(`#/experiments/${w().experimentId}`, 'Shop layout')
      await page.getByRole('table', { name: 'Conversion to shop_purchase' }).waitFor()
      for (const name of ['Pause', 'Delete', 'Save', 'Add a variant'])
        expect(await page.getByRole('button', { name }).count()).toBe(0)
      await tab.go('#/experiments', 'Experiments')
      expect(await page.getByRole('button', { name: 'New experiment' }).count()).toBe(0)
      tab.checkErrors()
    },
    FLOW,
  )
}

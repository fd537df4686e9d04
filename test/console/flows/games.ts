import { expect, test } from 'bun:test'
import { DESKTOP, PHONE } from '../driver'
import { FLOW, type World } from '../world'

/** Sign-in, games and environments, API keys; what a viewer is refused. */
export function gameFlows(w: () => World): void {
  test(
    'sign-in: a wrong password and the login throttle say why; the admin signs in and out',
    async () => {
      const { tab } = w()
      const page = tab.page
      await page.goto(`${tab.base}/`)
      await page.getByRole('heading', { name: 'Sign in to liveops' }).waitFor()
      await tab.done('sign-in', false)
      await page.getByLabel('Email').fill('viewer@test.local')
      await page.getByLabel('Password').fill('not-the-password')
      await page.getByRole('button', { name: 'Sign in' }).click()
      expect(await tab.alert()).toContain('Wrong email or password')
      // Five failures for one account: the sixth attempt meets the throttle, which says how long to wait.
      for (let i = 0; i < 5; i++) await page.getByRole('button', { name: 'Sign in' }).click()
      await page.getByRole('alert').filter({ hasText: 'Too many failed sign-ins' }).waitFor()
      expect(await tab.alert()).toMatch(/too many failed attempts; retry in \d+ s/)
      await tab.done('sign-in-throttled', false)
      await tab.signIn('admin@localhost', 'admin-password')
      // Signing out ends the login on the server: the token the page held is refused afterwards.
      const logout = page.waitForRequest((r) => r.url().endsWith('/api/auth/logout'))
      await tab.signOut()
      const held = (await logout).headers().authorization
      expect(held).toStartWith('Bearer ')
      expect((await fetch(`${w().base}/api/games`, { headers: { authorization: held } })).status).toBe(401)
      await page.getByText('You signed out.').waitFor()
      await tab.signIn('admin@localhost', 'admin-password')
      tab.checkErrors()
    },
    FLOW,
  )

  test(
    'keyboard only: sign in, skip to the content, open a page from the menu, the phone menu',
    async () => {
      const { tab } = w()
      const page = tab.page
      await tab.signOut()
      await page.goto(`${tab.base}/`)
      await page.getByRole('heading', { name: 'Sign in to liveops' }).waitFor()
      await page.keyboard.press('Tab')
      expect(await page.evaluate(() => document.activeElement?.getAttribute('type'))).toBe('email')
      await page.keyboard.type('admin@localhost')
      await page.keyboard.press('Tab')
      await page.keyboard.type('admin-password')
      await page.keyboard.press('Enter')
      await page.getByRole('button', { name: 'Sign out' }).waitFor()
      // A page opened moves the focus to its heading; the skip link, first in the page, shows when focused.
      await page.getByRole('heading', { level: 1, name: 'Games' }).waitFor()
      expect(await page.evaluate(() => document.activeElement?.tagName)).toBe('H1')
      const skip = page.getByRole('link', { name: 'Skip to content' })
      await skip.focus()
      expect((await skip.boundingBox())?.x).toBeGreaterThanOrEqual(0)
      await page.keyboard.press('Enter')
      expect(await page.evaluate(() => document.activeElement?.id)).toBe('main')
      await page.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name: 'Audit log' }).focus()
      await page.keyboard.press('Enter')
      await page.getByRole('heading', { level: 1, name: 'Audit log' }).waitFor()
      await page.setViewportSize(PHONE)
      const menu = page.getByRole('button', { name: 'Menu' })
      await menu.focus()
      await page.keyboard.press('Enter')
      // The menu opens on the next render: wait for it, then read it.
      await page.getByRole('button', { name: 'Menu', expanded: true }).waitFor()
      expect(await menu.getAttribute('aria-expanded')).toBe('true')
      await page
        .getByRole('navigation', { name: 'Pages' })
        .getByRole('link', { name: 'Games', exact: true })
        .focus()
      await page.keyboard.press('Enter')
      await page.getByRole('heading', { level: 1, name: 'Games' }).waitFor()
      await page.getByRole('button', { name: 'Menu', expanded: false }).waitFor()
      expect(await menu.getAttribute('aria-expanded')).toBe('false')
      await page.setViewportSize(DESKTOP)
      tab.checkErrors()
    },
    FLOW,
  )

  test(
    'games: create with its checks, status moves the API allows, a refusal with its message, environments',
    async () => {
      const { tab, a } = w()
      const page = tab.page
      await tab.go('#/games', 'Games')
      await page.getByText('No game yet.').waitFor()
      await tab.shot('games-empty', false)
      await page.getByRole('button', { name: 'New game' }).click()
      await page.getByLabel('Name').fill('')
      await page.getByRole('button', { name: 'Create game' }).click()
      await page.getByText('A name is needed.').waitFor()
      await page.getByLabel('Name').fill('Star Miners')
      await page.getByLabel('Genre').selectOption('STRATEGY')
      await page.getByLabel('Time zone').fill('Europe/Paris')
      await page.getByLabel('Currency').fill('eur')
      await page.getByRole('button', { name: 'Create game' }).click()
      await page.getByRole('heading', { level: 1, name: 'Star Miners' }).waitFor()
      w().gameId = page.url().split('#/games/')[1]
      const stored = await a.req('GET', `/api/games/${w().gameId}`, { token: await a.token('admin') })
      expect(stored.body).toMatchObject({
        name: 'Star Miners',
        defaultCurrency: 'EUR',
        status: 'DEVELOPMENT',
      })

      // Only the moves the API allows are offered; going live without a platform is refused by the API.
      await page.getByRole('button', { name: 'Move to testing' }).click()
      await page.getByText('Now TESTING.').waitFor()
      await page.getByRole('button', { name: 'Publish (go live)' }).click()
      const refusal = await tab.alert()
      expect(refusal).toContain('Not possible now.')
      expect(refusal).toContain('has no platform; add one before going LIVE')
      await page.getByRole('checkbox', { name: 'IOS' }).check()
      await page.getByRole('checkbox', { name: 'ANDROID' }).check()
      await page.getByRole('button', { name: 'Save changes' }).click()
      await page.getByText('Saved.').waitFor()
      await page.getByRole('button', { name: 'Publish (go live)' }).click()
      await page.getByText('Now LIVE.').waitFor()
      expect(await page.getByRole('button', { name: 'Move to testing' }).count()).toBe(0)
      await page.getByRole('button', { name: 'Unpublish (maintenance)' }).waitFor()

      await page.getByLabel('New environment').fill('QA')
      await page.getByText('Lower case letters, digits and dashes, starting with a letter.').first().waitFor()
      await page.getByLabel('New environment').fill('qa')
      await page.getByRole('button', { name: 'Add environment' }).click()
      await page.getByRole('button', { name: 'Settings of qa' }).click()
      await page.getByLabel('Sampling rate').fill('0.5')
      await page.getByLabel('PII: email').selectOption('drop')
      await page.getByRole('button', { name: 'Save settings' }).click()
      await page.getByText('Settings saved.').waitFor()
      await page.getByRole('cell', { name: '50%' }).waitFor()
      const env = await a.req('GET', `/api/games/${w().gameId}/environments/qa/settings`, {
        token: await a.token('admin'),
      })
      expect(env.body).toMatchObject({ samplingRate: 0.5, pii: { email: 'drop' } })
      await tab.done('game')
      await page.getByRole('button', { name: 'Delete qa' }).click()
      await page.getByText('Deleted qa.').waitFor()

      await a.req('POST', '/api/games', {
        token: await a.token('admin'),
        body: {
          name: 'Puzzle Bay',
          genre: 'PUZZLE',
          platforms: ['WEB'],
          timezone: 'UTC',
          defaultCurrency: 'USD',
        },
      })
      await tab.go('#/games')
      await tab.go('#/games?status=LIVE', 'Games')
      await page.getByRole('link', { name: 'Star Miners' }).waitFor()
      await page.getByRole('link', { name: 'Puzzle Bay' }).waitFor({ state: 'detached' })
      await tab.go('#/games', 'Games')
      await page.getByRole('link', { name: 'Puzzle Bay' }).waitFor()
      await tab.done('games')
    },
    FLOW,
  )

  test(
    'API keys: a new key is shown once with a copy button, then only its prefix; revoke',
    async () => {
      const { tab, a } = w()
      const page = tab.page
      await tab.choose('Star Miners')
      await tab.go('#/api-keys', 'API keys')
      await page.getByText('This game has no API key yet.').waitFor()
      await page.getByLabel('Key name').fill('android build')
      await page.getByRole('button', { name: 'Create key' }).click()
      const shown = page.getByLabel('API key "android build" for prod')
      await shown.waitFor()
      const key = await shown.inputValue()
      expect(key).toStartWith('lok_')
      expect(await a.auth.verifyApiKey(key)).toMatchObject({ kind: 'sdkKey' })
      await page.getByRole('button', { name: 'Copy' }).click()
      await page.getByText(/Copied to the clipboard|press Ctrl\+C/).waitFor()
      await tab.done('api-key-created')
      await page.getByRole('button', { name: 'I have copied it' }).click()
      expect(await page.getByLabel('API key "android build" for prod').count()).toBe(0)
      const row = page.getByRole('row').filter({ hasText: 'android build' })
      await row.getByText(key.slice(0, 8)).waitFor()
      expect(await page.content()).not.toContain(key)
      await row.getByRole('button', { name: 'Revoke android build' }).click()
      await row.getByText('revoked').waitFor()
      expect(await a.auth.verifyApiKey(key)).toBeUndefined()
      tab.checkErrors()
    },
    FLOW,
  )

  test(
    'a viewer sees no write control, and a page it may not read shows the API refusal',
    async () => {
      const { tab } = w()
      const page = tab.page
      await tab.signOut()
      await tab.signIn('viewer@test.local')
      await tab.go('#/games', 'Games')
      await page.getByRole('link', { name: 'Star Miners' }).click()
      await page.getByRole('heading', { level: 1, name: 'Star Miners' }).waitFor()
      for (const name of [
        'New game',
        'Unpublish (maintenance)',
        'Save changes',
        'Add environment',
        'Delete game…',
      ])
        expect(await page.getByRole('button', { name }).count()).toBe(0)
      // The menu offers no API keys page to a viewer; opened by its address, the API says no.
      expect(
        await page.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name: 'API keys' }).count(),
      ).toBe(0)
      await tab.go('#/api-keys', 'API keys')
      expect(await tab.alert()).toContain("Not allowed. permission 'apikeys:read' required")
      await tab.done('refused-viewer', false)
      await tab.signOut()
      await tab.signIn('admin@localhost', 'admin-password')
    },
    FLOW,
  )
}

/**
 * Tokens live in memory and are rotated: on a timer before the access token expires (the
 * page's clock run forward), and once after a 401, after which the refused call is sent again.
 */
export function tokenFlows(w: () => World): void {
  test(
    'the console rotates its tokens before they expire and after a 401, and keeps working',
    async () => {
      const { tab } = w()
      const ctx = await tab.page.context().browser()!.newContext()
      try {
        const page = await ctx.newPage()
        await page.clock.install()
        await page.goto(`${tab.base}/`)
        await page.getByLabel('Email').fill('operator@test.local')
        await page.getByLabel('Password').fill('password-123')
        await page.getByRole('button', { name: 'Sign in' }).click()
        await page.getByRole('heading', { level: 1, name: 'Games' }).waitFor()
        const rotated = page.waitForResponse(
          (r) => r.url().endsWith('/api/auth/refresh') && r.status() === 200,
        )
        await page.clock.runFor(15 * 60_000 * 0.75 + 1000)
        await rotated
        // A 401 (an access token the server no longer takes): one rotation, then the call again.
        let refused = false
        await page.route('**/api/games?*', async (route) => {
          if (refused) return route.continue()
          refused = true
          await route.fulfill({
            status: 401,
            contentType: 'application/json',
            body: '{"error":"unauthorized","message":"expired"}',
          })
        })
        const again = page.waitForResponse((r) => r.url().endsWith('/api/auth/refresh') && r.status() === 200)
        await page.evaluate(() => {
          location.hash = '#/games?status=LIVE'
        })
        await again
        await page.getByRole('link', { name: 'Star Miners' }).waitFor()
        expect(refused).toBe(true)
        expect(await page.getByRole('button', { name: 'Sign out' }).count()).toBe(1)
        // Nothing of the session is kept where a reload could find it.
        expect(
          await page.evaluate(() => [localStorage.length, sessionStorage.length, document.cookie]),
        ).toEqual([0, 0, ''])
        await page.reload()
        await page.getByRole('heading', { name: 'Sign in to liveops' }).waitFor()
      } finally {
        await ctx.close()
      }
    },
    FLOW,
  )
}

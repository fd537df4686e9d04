import { expect } from 'bun:test'
import { existsSync, mkdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { type Browser, type Page, chromium } from 'playwright-core'

/** Debian's Chromium (`.ci/run` installs it); Playwright's own download cannot work here. */
export const CHROMIUM = '/usr/bin/chromium'
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--no-first-run',
]

export function launch(): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)`)
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS })
}

/**
 * Where the page screenshots go: CONSOLE_SHOTS_DIR (scripts/console-shots.ts sets it and copies
 * the README's few into docs/console). Without it no page is photographed: a screenshot asserts
 * nothing, and the ones a test run took went to a temporary folder removed unseen at its end
 * (~12 s of each engine's ~90 s, the costliest step after axe-core's).
 */
export function shotsDir(): string | undefined {
  return process.env.CONSOLE_SHOTS_DIR
}

const AXE = readFileSync(join(import.meta.dir, '../../node_modules/axe-core/axe.min.js'), 'utf8')

export const PHONE = { width: 390, height: 844 }
export const DESKTOP = { width: 1280, height: 860 }

interface AxeViolation {
  id: string
  impact: string | null
  help: string
  nodes: Array<{ target: unknown; failureSummary?: string }>
}

/**
 * One browser tab on the console, signed in as one user at a time. Every page error and every
 * console error other than a refused request (the console shows refusals itself) fails the test
 * that caused it: a script error, or a style or script the content security policy blocked.
 */
export class ConsoleTab {
  private errors: string[] = []

  private constructor(
    readonly page: Page,
    readonly base: string,
    readonly engine: string,
  ) {
    page.on('pageerror', (e) => this.errors.push(`page error: ${e.message}`))
    page.on('console', (m) => {
      if (
        m.type() === 'error' &&
        !/Failed to load resource: the server responded with a status of (4\d\d)/.test(m.text())
      )
        this.errors.push(`console: ${m.text()}`)
    })
  }

  static async open(browser: Browser, base: string, engine: string): Promise<ConsoleTab> {
    const ctx = await browser.newContext({ viewport: DESKTOP, acceptDownloads: true, timezoneId: 'UTC' })
    const page = await ctx.newPage()
    page.setDefaultTimeout(15_000)
    return new ConsoleTab(page, base, engine)
  }

  /** Throws (and forgets) the errors the page reported since the last check. */
  checkErrors(): void {
    const e = this.errors.splice(0)
    expect(e).toEqual([])
  }

  async signIn(email: string, password = 'password-123'): Promise<void> {
    await this.page.goto(`${this.base}/`)
    await this.page.getByLabel('Email').fill(email)
    await this.page.getByLabel('Password').fill(password)
    await this.page.getByRole('button', { name: 'Sign in' }).click()
    await this.page.getByRole('button', { name: 'Sign out' }).waitFor()
  }

  async signOut(): Promise<void> {
    await this.page.getByRole('button', { name: 'Sign out' }).click()
    await this.page.getByRole('heading', { name: 'Sign in to liveops' }).waitFor()
  }

  /** Opens a page by its address (the session stays: only the hash changes) and waits for its heading. */
  async go(hash: string, heading?: string | RegExp): Promise<void> {
    await this.page.evaluate((h) => {
      location.hash = h
    }, hash)
    if (heading) await this.page.getByRole('heading', { level: 1, name: heading }).waitFor()
  }

  /** Picks the game (and environment) every game-scoped page reads. */
  async choose(game: string, env = 'prod'): Promise<void> {
    const scope = this.page.getByRole('group', { name: 'Game and environment' })
    await scope.getByLabel('Game').selectOption({ label: game })
    await scope.getByLabel('Environment').selectOption(env)
  }

  /** No axe-core violation of impact serious or critical on the page as it is now. */
  async accessible(what: string): Promise<void> {
    if (!(await this.page.evaluate(() => 'axe' in window))) await this.page.evaluate(AXE)
    const violations = await this.page.evaluate(async () => {
      const w = window as unknown as {
        axe: { run: (ctx: Document, o: object) => Promise<{ violations: AxeViolation[] }> }
      }
      return (await w.axe.run(document, { resultTypes: ['violations'] })).violations
    })
    const serious = violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map(
        (v) =>
          `${what}: ${v.id} (${v.impact}) ${v.help}: ${v.nodes.map((n) => JSON.stringify(n.target)).join(' ')}`,
      )
    expect(serious).toEqual([])
  }

  /** The page as a PNG in shotsDir()/<engine>/<name>.png (the whole page, or the viewport only), when kept. */
  async shot(name: string, fullPage = true): Promise<void> {
    const kept = shotsDir()
    if (!kept) return
    const dir = join(kept, this.engine)
    mkdirSync(dir, { recursive: true })
    await this.page.screenshot({ path: join(dir, `${name}.png`), fullPage })
  }

  /** Accessibility, the errors so far and a screenshot (when kept): what every page ends with. */
  async done(name: string, fullPage = true): Promise<void> {
    await this.accessible(name)
    this.checkErrors()
    await this.shot(name, fullPage)
  }

  /** The text of the page's alert after a refusal (the API's message). */
  async alert(): Promise<string> {
    const a = this.page.getByRole('alert').first()
    await a.waitFor()
    return (await a.textContent()) ?? ''
  }

  /**
   * Whether the page offers a horizontal scroll to a phone (it must not). Charts redraw at the new
   * width on their ResizeObserver, a frame or two after the viewport changes, so the page gets two
   * seconds to settle: an overflow that is still there then is a real one.
   */
  async overflowsSideways(): Promise<boolean> {
    const fits = () => document.documentElement.scrollWidth <= document.documentElement.clientWidth + 1
    try {
      await this.page.waitForFunction(fits, undefined, { timeout: 2000 })
      return false
    } catch {
      return true
    }
  }
}

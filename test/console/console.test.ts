import { afterAll, beforeAll, describe } from 'bun:test'
import type { Browser } from 'playwright-core'
import { enginesFor } from '../helpers'
import { launch } from './driver'
import { analyticsFlows } from './flows/analytics'
import { experimentFlows } from './flows/experiments'
import { gameFlows, tokenFlows } from './flows/games'
import { notifyFlows } from './flows/notify'
import { opsFlows } from './flows/ops'
import { FLOW, type World, consoleWorld } from './world'

/**
 * The console in a real browser (issue 37 point 5): Debian's Chromium through playwright-core,
 * one browser for the file and one app per engine, the pages in sequence as a team would use
 * them: sign in, create, read, change, and what a lesser role is refused. Each page is checked
 * with axe-core (no serious or critical violation), and photographed when CONSOLE_SHOTS_DIR is
 * set (`bun scripts/console-shots.ts --keep` keeps every page's screenshot).
 */
let browser: Browser
beforeAll(async () => {
  browser = await launch()
}, FLOW)
afterAll(async () => {
  await browser?.close()
})

for (const engine of enginesFor('test/console/console.test.ts'))
  describe(`[${engine}] console`, () => {
    let world: World | undefined
    const w = () => world as World
    beforeAll(async () => {
      world = await consoleWorld(engine, browser)
    }, FLOW)
    afterAll(async () => {
      await world?.tab.page.context().close()
      world?.sink.stop()
      await world?.a.stop()
    })
    gameFlows(w)
    tokenFlows(w)
    experimentFlows(w)
    analyticsFlows(w)
    notifyFlows(w)
    opsFlows(w)
  })

import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { AnalyticsFunnel } from './pages/analytics/funnel'
import { AnalyticsLevels } from './pages/analytics/levels'
import { AnalyticsAds, AnalyticsRevenue, AnalyticsSessions } from './pages/analytics/money'
import { AnalyticsOverview } from './pages/analytics/overview'
import { AnalyticsPaths } from './pages/analytics/paths'
import { AnalyticsRealtime } from './pages/analytics/realtime'
import { AnalyticsRetention } from './pages/analytics/retention'
import { ApiKeys } from './pages/apikeys'
import { ExperimentDetail } from './pages/experiments/detail'
import { Experiments } from './pages/experiments/list'
import { GameDetail } from './pages/game'
import { Games } from './pages/games'

type View = (params: string[], query: URLSearchParams) => VNode

/** Every page by its path pattern (the hash after `#`). */
export const ROUTES: Array<[RegExp, View]> = [
  [/^\/games$/, (_, q) => html`<${Games} query=${q} />`],
  [/^\/games\/([^/]+)$/, ([id]) => html`<${GameDetail} key=${id} id=${id} />`],
  [/^\/api-keys$/, (_, q) => html`<${ApiKeys} query=${q} />`],
  [/^\/experiments$/, (_, q) => html`<${Experiments} query=${q} />`],
  [/^\/experiments\/([^/]+)$/, ([id]) => html`<${ExperimentDetail} key=${id} id=${id} />`],
  [/^\/analytics\/overview$/, () => html`<${AnalyticsOverview} />`],
  [/^\/analytics\/retention$/, () => html`<${AnalyticsRetention} />`],
  [/^\/analytics\/funnel$/, () => html`<${AnalyticsFunnel} />`],
  [/^\/analytics\/paths$/, () => html`<${AnalyticsPaths} />`],
  [/^\/analytics\/revenue$/, () => html`<${AnalyticsRevenue} />`],
  [/^\/analytics\/ads$/, () => html`<${AnalyticsAds} />`],
  [/^\/analytics\/sessions$/, () => html`<${AnalyticsSessions} />`],
  [/^\/analytics\/levels$/, () => html`<${AnalyticsLevels} />`],
  [/^\/analytics\/realtime$/, () => html`<${AnalyticsRealtime} />`],
]

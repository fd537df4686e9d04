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
import { AlertRules } from './pages/notify/alerts'
import { Channels } from './pages/notify/channels'
import { IncidentDetail, Incidents } from './pages/notify/incidents'
import { DeliveryLog, DeliveryLogs } from './pages/notify/logs'
import { Rosters } from './pages/notify/rosters'
import { Rules } from './pages/notify/rules'
import { Templates } from './pages/notify/templates'
import { Agents } from './pages/ops/agents'
import { Audit } from './pages/ops/audit'
import { Backups } from './pages/ops/backups'
import { Certificates } from './pages/ops/certificates'
import { Models } from './pages/ops/ml'
import { ModelDetail } from './pages/ops/model'
import { RateLimits } from './pages/ops/ratelimits'

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
  [/^\/incidents$/, (_, q) => html`<${Incidents} query=${q} />`],
  [/^\/incidents\/([^/]+)$/, ([id]) => html`<${IncidentDetail} key=${id} id=${id} />`],
  [/^\/alerts$/, () => html`<${AlertRules} />`],
  [/^\/notify\/channels$/, (_, q) => html`<${Channels} query=${q} />`],
  [/^\/notify\/templates$/, () => html`<${Templates} />`],
  [/^\/notify\/logs$/, (_, q) => html`<${DeliveryLogs} query=${q} />`],
  [/^\/notify\/logs\/([^/]+)$/, ([id]) => html`<${DeliveryLog} key=${id} id=${id} />`],
  [/^\/rules$/, () => html`<${Rules} />`],
  [/^\/rosters$/, (_, q) => html`<${Rosters} query=${q} />`],
  [/^\/ml$/, () => html`<${Models} />`],
  [/^\/ml\/([^/]+)$/, ([id]) => html`<${ModelDetail} key=${id} id=${id} />`],
  [/^\/ops\/certificates$/, (_, q) => html`<${Certificates} query=${q} />`],
  [/^\/ops\/backups$/, () => html`<${Backups} />`],
  [/^\/ops\/agents$/, (_, q) => html`<${Agents} query=${q} />`],
  [/^\/ops\/rate-limits$/, () => html`<${RateLimits} />`],
  [/^\/ops\/audit$/, (_, q) => html`<${Audit} query=${q} />`],
]

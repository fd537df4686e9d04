import { html } from 'htm/preact'
import type { ComponentChildren, VNode } from 'preact'
import { Select } from '../../components/form'
import { Empty, Page } from '../../components/ui'
import { change, isoDay } from '../../lib/format'
import { navigate, route } from '../../lib/router'
import { useScope } from '../../lib/scope'
import { useStore } from '../../lib/store'
import type { Game } from '../../lib/types'

export interface Frame {
  gameId: string
  env: string
  game: Game
  /** Whole days, inclusive: `YYYY-MM-DD`. */
  startDate: string
  endDate: string
  days: number
}

/**
 * An analytics page: needs a chosen game (the header's picker) and reads a range of days from
 * the address (`?days=7`), so a link shows the same numbers to a colleague.
 */
export function AnalyticsPage(p: {
  title: string
  ranges?: number[]
  intro?: ComponentChildren
  /** More controls beside the period (they change the address too). */
  filters?: ComponentChildren
  render: (f: Frame) => ComponentChildren
}): VNode {
  const s = useScope()
  const r = useStore(route)
  const ranges = p.ranges ?? [7, 14, 30]
  const days = Number(r.query.get('days')) || ranges[0]
  const picker = html`<div class="filters">
    ${
      ranges.length > 1 &&
      html`<${Select}
        label="Period"
        value=${String(days)}
        options=${ranges.map((d) => [String(d), d === 1 ? 'Today' : `Last ${d} days`] as const)}
        onValue=${(v: string) => navigate(r.path, { ...Object.fromEntries(r.query), days: v })}
      />`
    }
    ${p.filters}
  </div>`
  return html`<${Page} title=${p.title}>
    ${p.intro && html`<p class="intro">${p.intro}</p>`}
    ${
      !s.games
        ? null
        : !s.game || !s.gameId
          ? html`<${Empty}><p>Create a game first: analytics are per game and environment.</p><//>`
          : html`${(ranges.length > 1 || p.filters) && picker}
            ${p.render({
              gameId: s.gameId,
              env: s.env,
              game: s.game,
              days,
              startDate: isoDay(-(days - 1)),
              endDate: isoDay(0),
            })}`
    }
  <//>`
}

/** A headline number with how it moved against the period before. */
export function Kpi(p: {
  label: string
  value: string
  now?: number
  before?: number
  previous?: string
  lowerIsBetter?: boolean
}): VNode {
  const c = p.now !== undefined && p.before !== undefined ? change(p.now, p.before) : undefined
  const good = c === undefined || c === 0 ? undefined : c > 0 !== !!p.lowerIsBetter
  return html`<div class="kpi">
    <div class="kpi-label">${p.label}</div>
    <div class="kpi-value">${p.value}</div>
    ${
      p.previous !== undefined &&
      html`<div class=${`kpi-change ${good === undefined ? '' : good ? 'up' : 'down'}`}>
        ${c === undefined ? 'no earlier data' : `${c > 0 ? '▲ up' : c < 0 ? '▼ down' : 'unchanged'} ${c ? `${Math.abs(c * 100).toFixed(1)}%` : ''}`}
        <span class="hint"> (before: ${p.previous})</span>
      </div>`
    }
  </div>`
}

export function Kpis({ children }: { children: ComponentChildren }): VNode {
  return html`<div class="kpis">${children}</div>`
}

import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useState } from 'preact/hooks'
import { Form, Input, Select } from '../../components/form'
import { Async, Section } from '../../components/ui'
import { api } from '../../lib/api'
import { num, pct } from '../../lib/format'
import { useApi } from '../../lib/hooks'
import { AnalyticsPage, type Frame } from './frame'

interface Paths {
  total: number
  by: string
  paths: Array<{ path: string[]; count: number; share: number }>
}

interface Params {
  top: string
  length: string
  by: string
  startEvent: string
  exclude: string
  hours: string
}

function Body({ f }: { f: Frame }): VNode {
  const [draft, setDraft] = useState<Params>({
    top: '10',
    length: '5',
    by: 'session',
    startEvent: '',
    exclude: 'heartbeat',
    hours: '24',
  })
  const [p, setP] = useState(draft)
  const state = useApi(
    (signal) => {
      const end = new Date()
      return api.get<Paths>(
        '/api/v1/analytics/behavior/paths',
        {
          gameId: f.gameId,
          env: f.env,
          top: p.top,
          length: p.length,
          by: p.by,
          startEvent: p.startEvent.trim(),
          exclude: p.exclude.trim(),
          startDate: new Date(end.getTime() - Number(p.hours) * 3_600_000).toISOString(),
          endDate: end.toISOString(),
        },
        signal,
      )
    },
    [f.gameId, f.env, p],
  )
  const field = (k: keyof Params) => (v: string) => setDraft({ ...draft, [k]: v })
  return html`
    <${Section} title="Which paths">
      <${Form} label="Paths" onSubmit=${() => setP(draft)} class="inline">
        <${Select} label="Events of" value=${draft.hours} options=${[['24', 'Last 24 hours'], ['72', 'Last 3 days'], ['168', 'Last 7 days']]} onValue=${field('hours')} />
        <${Select} label="One path per" value=${draft.by} options=${[['session', 'Session'], ['user', 'Player']]} onValue=${field('by')} />
        <${Input} label="Paths shown" type="number" min=${1} max=${100} value=${draft.top} onValue=${field('top')} />
        <${Input} label="Steps per path" type="number" min=${2} max=${20} value=${draft.length} onValue=${field('length')} />
        <${Input} label="Starting at event" value=${draft.startEvent} onValue=${field('startEvent')} placeholder="any" />
        <${Input} label="Leave out events" value=${draft.exclude} onValue=${field('exclude')} hint="Comma-separated." />
        <button type="submit">Show paths</button>
      <//>
    <//>
    <${Section} title="Most frequent paths">
      <${Async}
        state=${state}
        what="paths"
        isEmpty=${(d: Paths) => d.paths.length === 0}
        empty=${html`<p>No path in this period: no events with a player id were sent.</p>`}
        render=${(
          d: Paths,
        ) => html`<p class="hint">${num(d.total, 0)} ${d.by === 'user' ? 'players' : 'sessions'} counted.</p>
          <ol class="paths">
            ${d.paths.map(
              (x) => html`<li>
                <span class="path">${x.path.map((e, i) => html`${i > 0 && html`<span class="arrow" aria-label="then"> → </span>`}<code>${e}</code>`)}</span>
                <span class="bar-track" aria-hidden="true"><span class="bar-fill" style=${{ width: `${(x.share / (d.paths[0]?.share || 1)) * 100}%` }}></span></span>
                <span class="bar-value">${num(x.count, 0)} (${pct(x.share)})</span>
              </li>`,
            )}
          </ol>`}
      />
    <//>
  `
}

/** `#/analytics/paths`: the most frequent sequences of events per session or player. */
export function AnalyticsPaths(): VNode {
  return html`<${AnalyticsPage}
    title="Paths"
    ranges=${[1]}
    intro="The most frequent sequences of events, per session or per player, from raw events."
    render=${(f: Frame) => html`<${Body} key=${`${f.gameId}/${f.env}`} f=${f} />`}
  />`
}

import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useId, useState } from 'preact/hooks'
import { Bars } from '../../components/chart'
import { Form, Input, Select } from '../../components/form'
import { Table } from '../../components/table'
import { ActionNote, Section } from '../../components/ui'
import { api } from '../../lib/api'
import { ms, num, pct } from '../../lib/format'
import { useAction, useApi } from '../../lib/hooks'
import { AnalyticsPage, type Frame } from './frame'

interface Step {
  step: number
  event: string
  users: number
  conversionFromFirst: number
  conversionFromPrevious: number
  dropOff: number
  medianTimeFromPreviousMs: number | null
  medianTimeFromFirstMs: number | null
}
export interface FunnelResult {
  users: number
  converted: number
  conversionRate: number
  medianTimeToConvertMs: number | null
  steps: Step[]
}
interface Behavior {
  events: Array<{ event: string; count: number }>
}

const HOURS = [
  ['24', 'Last 24 hours'],
  ['72', 'Last 3 days'],
  ['168', 'Last 7 days'],
] as const

/** Names of the events seen lately, offered as suggestions in the step fields. */
function useEventNames(f: Frame): string[] {
  const s = useApi(
    (signal) =>
      api.get<Behavior>('/api/v1/analytics/behavior', { gameId: f.gameId, env: f.env, top: 50 }, signal),
    [f.gameId, f.env],
  )
  return (s.data?.events ?? []).map((e) => e.event)
}

export function FunnelResultView({ r }: { r: FunnelResult }): VNode {
  return html`<div class="funnel-result">
    <p>
      <strong>${num(r.converted, 0)}</strong> of ${num(r.users, 0)} players went all the way
      (<strong>${pct(r.conversionRate)}</strong>); median time to convert ${ms(r.medianTimeToConvertMs)}.
    </p>
    <${Bars}
      title="Players reaching each step"
      rows=${r.steps.map((s) => ({
        label: `${s.step}. ${s.event}`,
        value: s.users,
        text: num(s.users, 0),
        note: s.step > 1 ? `${pct(s.conversionFromFirst)} of step 1` : undefined,
      }))}
    />
    <${Table}
      caption="Steps"
      rows=${r.steps}
      rowKey=${(s: Step) => String(s.step)}
      columns=${[
        { label: 'Step', value: (s: Step) => `${s.step}. ${s.event}` },
        { label: 'Players', value: (s: Step) => num(s.users, 0), numeric: true },
        { label: 'From previous', value: (s: Step) => pct(s.conversionFromPrevious), numeric: true },
        { label: 'Dropped', value: (s: Step) => num(s.dropOff, 0), numeric: true },
        {
          label: 'Median time from previous',
          value: (s: Step) => ms(s.medianTimeFromPreviousMs),
          numeric: true,
        },
      ]}
    />
  </div>`
}

function Builder({ f }: { f: Frame }): VNode {
  const names = useEventNames(f)
  const list = useId()
  const [steps, setSteps] = useState<string[]>(['session_start', 'level_start', ''])
  const [hours, setHours] = useState('24')
  const [win, setWin] = useState('1')
  const [unit, setUnit] = useState('day')
  const [order, setOrder] = useState('ordered')
  const [result, setResult] = useState<FunnelResult>()
  const [problem, setProblem] = useState<string>()
  const act = useAction()
  const set = (i: number, v: string) => setSteps(steps.map((s, j) => (j === i ? v : s)))
  const move = (i: number, d: number) => {
    const next = [...steps]
    ;[next[i], next[i + d]] = [next[i + d], next[i]]
    setSteps(next)
  }
  const run = async () => {
    const used = steps.map((s) => s.trim()).filter(Boolean)
    if (used.length < 2) return setProblem('A funnel needs at least two steps with an event name.')
    setProblem(undefined)
    const end = new Date()
    const start = new Date(end.getTime() - Number(hours) * 3_600_000)
    await act.run(async () => {
      setResult(
        await api.post<FunnelResult>(
          '/api/v1/analytics/behavior/funnel',
          {
            steps: used.map((event) => ({ event })),
            window: { value: Number(win), unit },
            order,
            startDate: start.toISOString(),
            endDate: end.toISOString(),
          },
          { gameId: f.gameId, env: f.env },
        ),
      )
    })
  }
  return html`
    <${Section} title="Steps">
      <${Form} label="Funnel" onSubmit=${run}>
        <datalist id=${list}>${names.map((n) => html`<option value=${n}></option>`)}</datalist>
        <ol class="steps">
          ${steps.map(
            (s, i) => html`<li key=${i}>
              <label for=${`${list}-${i}`} class="sr-only">Step ${i + 1} event</label>
              <span aria-hidden="true" class="step-no">${i + 1}.</span>
              <input id=${`${list}-${i}`} list=${list} value=${s} placeholder="event name" onInput=${(e: Event) => set(i, (e.currentTarget as HTMLInputElement).value)} />
              <button type="button" class="secondary small" disabled=${i === 0} onClick=${() => move(i, -1)}>Up<span class="sr-only"> step ${i + 1}</span></button>
              <button type="button" class="secondary small" disabled=${i === steps.length - 1} onClick=${() => move(i, 1)}>Down<span class="sr-only"> step ${i + 1}</span></button>
              <button type="button" class="secondary small" disabled=${steps.length <= 2} onClick=${() => setSteps(steps.filter((_, j) => j !== i))}>Remove<span class="sr-only"> step ${i + 1}</span></button>
            </li>`,
          )}
        </ol>
        <div><button type="button" class="secondary" disabled=${steps.length >= 10} onClick=${() => setSteps([...steps, ''])}>Add a step</button></div>
        <div class="grid3">
          <${Select} label="Events of" value=${hours} options=${HOURS} onValue=${setHours} />
          <${Input} label="Conversion window" type="number" min=${1} value=${win} onValue=${setWin} />
          <${Select} label="Window unit" value=${unit} options=${['minute', 'hour', 'day']} onValue=${setUnit} />
          <${Select}
            label="Order"
            value=${order}
            options=${[
              ['ordered', 'In order (others between allowed)'],
              ['strict', 'Strictly in a row'],
              ['any', 'Any order'],
            ]}
            onValue=${setOrder}
          />
        </div>
        ${problem && html`<p class="note error" role="alert">${problem}</p>`}
        <${ActionNote} action=${act} />
        <div><button type="submit" disabled=${act.busy}>${act.busy ? 'Counting…' : 'Show funnel'}</button></div>
      <//>
    <//>
    ${result && html`<${Section} title="Result"><${FunnelResultView} r=${result} /><//>`}
  `
}

/** `#/analytics/funnel`: build a funnel from event names, with its window and order. */
export function AnalyticsFunnel(): VNode {
  return html`<${AnalyticsPage}
    title="Funnels"
    ranges=${[1]}
    intro="Players who did each step after the first, within the conversion window. Counted from raw events (at most the last 7 days)."
    render=${(f: Frame) => html`<${Builder} key=${`${f.gameId}/${f.env}`} f=${f} />`}
  />`
}

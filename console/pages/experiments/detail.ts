import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useEffect, useState } from 'preact/hooks'
import { Form, Input } from '../../components/form'
import { Table } from '../../components/table'
import { ActionNote, Async, Badge, Can, Facts, Page, Section } from '../../components/ui'
import { api } from '../../lib/api'
import { num, pct, when } from '../../lib/format'
import { useAction, useApi } from '../../lib/hooks'
import { navigate } from '../../lib/router'
import type { Experiment } from './list'
import { type Variant, VariantEditor, variantProblems } from './variants'

interface Interval {
  lower: number
  upper: number
}
interface Arm {
  name: string
  exposures: number
  conversions: number
  conversionRate: number
  vsControl: {
    uplift: number | null
    difference: number
    ci95: Interval
    upliftCi95: Interval
    pValue: number
    significant: boolean
  } | null
}
interface Metric {
  metric: string
  variants: Arm[]
}
interface Results {
  control: string | null
  totalExposures: number
  exposures: Array<{ name: string; weight: number; exposures: number; share: number }>
  primary: Metric | null
  secondary: Metric[]
  srm: { chiSquare: number | null; pValue: number | null; mismatch: boolean }
  unexpectedVariants: Array<{ name: string; exposures: number; others?: number }>
}

const signed = (v: number) => `${v > 0 ? '+' : ''}${(v * 100).toFixed(1)}%`

/** The uplift's 95% interval drawn on a line through zero: a bar that clears zero is significant. */
function Interval({ ci, uplift }: { ci: Interval; uplift: number | null }): VNode {
  const span = Math.max(0.05, Math.abs(ci.lower), Math.abs(ci.upper)) * 1.1
  const at = (v: number) => `${50 + (v / span) * 50}%`
  return html`<span class="ci" aria-hidden="true">
    <span class="ci-zero"></span>
    <span class=${`ci-bar ${ci.lower > 0 ? 'up' : ci.upper < 0 ? 'down' : ''}`} style=${{ left: at(ci.lower), width: `calc(${at(ci.upper)} - ${at(ci.lower)})` }}></span>
    ${uplift !== null && html`<span class="ci-dot" style=${{ left: at(uplift) }}></span>`}
  </span>`
}

function MetricTable({ m, control }: { m: Metric; control: string | null }): VNode {
  return html`<${Table}
    caption=${`Conversion to ${m.metric}`}
    rows=${m.variants}
    rowKey=${(a: Arm) => a.name}
    columns=${[
      {
        label: 'Variant',
        value: (a: Arm) =>
          html`${a.name}${a.name === control ? html` <span class="hint">(control)</span>` : ''}`,
      },
      { label: 'Exposed', value: (a: Arm) => num(a.exposures, 0), numeric: true },
      { label: 'Converted', value: (a: Arm) => num(a.conversions, 0), numeric: true },
      { label: 'Rate', value: (a: Arm) => pct(a.conversionRate, 2), numeric: true },
      {
        label: 'Uplift',
        value: (a: Arm) => (a.vsControl?.uplift === null || !a.vsControl ? '–' : signed(a.vsControl.uplift)),
        numeric: true,
      },
      {
        label: 'Uplift, 95% interval',
        value: (a: Arm) =>
          a.vsControl
            ? html`<span class="ci-cell">${signed(a.vsControl.upliftCi95.lower)} to ${signed(a.vsControl.upliftCi95.upper)} <${Interval} ci=${a.vsControl.upliftCi95} uplift=${a.vsControl.uplift} /></span>`
            : '–',
      },
      {
        label: 'p-value',
        value: (a: Arm) => (a.vsControl ? a.vsControl.pValue.toFixed(4) : '–'),
        numeric: true,
      },
      {
        label: 'Significant',
        value: (a: Arm) =>
          a.vsControl
            ? html`<${Badge} value=${a.vsControl.significant ? 'yes' : 'no'} tone=${a.vsControl.significant ? 'good' : 'neutral'} />`
            : '–',
      },
    ]}
  />`
}

function ResultsView({ id }: { id: string }): VNode {
  const state = useApi(
    (signal) => api.get<Results>(`/api/experiments/${encodeURIComponent(id)}/results`, undefined, signal),
    [id],
  )
  return html`<${Async}
    state=${state}
    what="results"
    isEmpty=${(r: Results) => r.totalExposures === 0}
    empty=${html`<p>No player has been exposed yet: results appear once clients report <code>experiment_exposure</code> events.</p>`}
    render=${(r: Results) => html`
      ${
        r.srm.mismatch
          ? html`<p class="srm bad" role="alert"><strong>Sample ratio mismatch:</strong> exposures do not follow the weights (χ² ${num(r.srm.chiSquare)}, p = ${r.srm.pValue?.toExponential(2)}). Check assignment and logging before trusting the results.</p>`
          : html`<p class="srm ok"><${Badge} value="No sample ratio mismatch" tone="good" /> Exposures follow the weights (p = ${r.srm.pValue?.toFixed(3) ?? '–'}).</p>`
      }
      <${Table}
        caption=${`Exposures (${num(r.totalExposures, 0)})`}
        rows=${r.exposures}
        rowKey=${(e: Results['exposures'][number]) => e.name}
        columns=${[
          { label: 'Variant', value: (e: Results['exposures'][number]) => e.name },
          { label: 'Weight', value: (e: Results['exposures'][number]) => `${e.weight}%`, numeric: true },
          {
            label: 'Exposed',
            value: (e: Results['exposures'][number]) => num(e.exposures, 0),
            numeric: true,
          },
          { label: 'Share', value: (e: Results['exposures'][number]) => pct(e.share), numeric: true },
        ]}
      />
      ${r.primary ? html`<${MetricTable} m=${r.primary} control=${r.control} />` : html`<p>No primary metric is set: edit the experiment to name one.</p>`}
      ${r.secondary.map((m) => html`<${MetricTable} m=${m} control=${r.control} />`)}
      ${r.unexpectedVariants.length > 0 && html`<p class="note error">Exposures name variants the experiment does not have: ${r.unexpectedVariants.map((v) => `${v.name} (${v.exposures})`).join(', ')}.</p>`}
      <button type="button" class="secondary" onClick=${state.reload}>Refresh results</button>
    `}
  />`
}

function Edit({ e, onSaved }: { e: Experiment; onSaved: (x: Experiment) => void }): VNode {
  const [variants, setVariants] = useState<Variant[]>(e.config.variants)
  const [name, setName] = useState(e.name)
  const act = useAction()
  useEffect(() => setVariants(e.config.variants), [e])
  const save = () => {
    if (variantProblems(variants).length) return
    void act.run(
      async () =>
        onSaved(
          await api.put<Experiment>(`/api/experiments/${e.id}`, { name, config: { ...e.config, variants } }),
        ),
      'Saved.',
    )
  }
  return html`<${Form} label="Edit experiment" onSubmit=${save}>
    <${Input} label="Name" value=${name} onValue=${setName} />
    <${VariantEditor} value=${variants} onChange=${setVariants} />
    <${ActionNote} action=${act} />
    <div><button type="submit" disabled=${act.busy}>Save</button></div>
  <//>`
}

/** `#/experiments/{id}`: its variants, publish and pause, and the results with uplift, interval and SRM. */
export function ExperimentDetail({ id }: { id: string }): VNode {
  const state = useApi(
    (signal) => api.get<Experiment>(`/api/experiments/${encodeURIComponent(id)}`, undefined, signal),
    [id],
  )
  const [e, setE] = useState<Experiment>()
  useEffect(() => setE(state.data), [state.data])
  const act = useAction()
  const base = `/api/experiments/${encodeURIComponent(id)}`
  const step = (what: 'publish' | 'pause') =>
    act.run(
      async () => setE(await api.post<Experiment>(`${base}/${what}`)),
      what === 'publish' ? 'Running.' : 'Paused.',
    )
  const remove = async () => {
    if (await act.run(() => api.del(base))) navigate('/experiments')
  }
  return html`<${Page} title=${e?.name ?? 'Experiment'}>
    <${Async}
      state=${e ? { ...state, data: e } : state}
      what="the experiment"
      render=${(x: Experiment) => html`
        <${Section} title="Status">
          <p>Status: <${Badge} value=${x.status} /></p>
          <${Can} perm="experiments:write">
            <div class="buttons">
              ${x.status !== 'running' && html`<button type="button" onClick=${() => step('publish')} disabled=${act.busy}>${x.status === 'paused' ? 'Resume' : 'Publish (start)'}</button>`}
              ${x.status === 'running' && html`<button type="button" class="secondary" onClick=${() => step('pause')} disabled=${act.busy}>Pause</button>`}
              <button type="button" class="danger" onClick=${remove} disabled=${act.busy}>Delete</button>
            </div>
            <${ActionNote} action=${act} />
          <//>
          <${Facts}
            items=${[
              ['Environment', x.environment],
              ['Variants', x.config.variants.map((v) => `${v.name} ${v.weight}%`).join(', ')],
              ['Primary metric', x.config.metrics?.primary ?? '–'],
              ['Secondary metrics', x.config.metrics?.secondary?.join(', ') || '–'],
              ['Salt', html`<code>${x.salt}</code>`],
              ['Published', when(x.publishedAt)],
            ]}
          />
        <//>
        <${Section} title="Results"><${ResultsView} id=${x.id} /><//>
        <${Can} perm="experiments:write"><${Section} title="Edit"><${Edit} e=${x} onSaved=${setE} /><//><//>
      `}
    />
  <//>`
}

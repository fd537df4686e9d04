import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useEffect, useRef, useState } from 'preact/hooks'
import { Check, Form, Input, Select } from '../../components/form'
import { Table } from '../../components/table'
import { ActionNote, Async, Badge, Can, Facts, Page, Section } from '../../components/ui'
import { api } from '../../lib/api'
import { num, pct, when } from '../../lib/format'
import { useAction, useApi, useInterval } from '../../lib/hooks'
import type { Page as Paged } from '../../lib/types'
import type { Model } from './ml'

interface Job {
  id: string
  status: string
  progress: number
  stage: string
  datasetConfig: { source: string; query: string; features: string[]; label?: string }
  metrics?: Record<string, number>
  error?: string
  version?: number
  rowsUsed?: number
  createdAt: string
  finishedAt?: string
}
interface Version {
  version: number
  status: string
  algorithm: string
  metrics: Record<string, number>
  datasetConfig: { features: string[]; label?: string }
  createdAt: string
}
interface Prediction {
  prediction: string
  probability: number
  confidence: number
  latencyMs: number
  version: number
  arm: string
  value?: number
}

const enc = encodeURIComponent
const metricText = (m?: Record<string, number>) =>
  m && Object.keys(m).length
    ? Object.entries(m)
        .map(
          ([k, v]) =>
            `${k} ${Math.abs(v) <= 1 && ['accuracy', 'precision', 'recall', 'f1', 'auc'].includes(k) ? pct(v) : num(v)}`,
        )
        .join(' · ')
    : '–'

/** Upload a CSV, or name events, then start a training job. */
function Train({ model, onStarted }: { model: Model; onStarted: () => void }): VNode {
  const [source, setSource] = useState('csv')
  const [query, setQuery] = useState('')
  const [features, setFeatures] = useState('')
  const [label, setLabel] = useState('')
  const [uploaded, setUploaded] = useState<string>()
  const act = useAction()
  const upload = async (e: Event) => {
    const f = (e.currentTarget as HTMLInputElement).files?.[0]
    if (!f) return
    await act.run(async () => {
      const text = await f.text()
      const ds = await api.send<{ id: string; columns: string[]; rows: number }>(
        'POST',
        `/api/ml-models/${enc(model.id)}/datasets`,
        {
          raw: text,
          type: 'text/csv',
          query: { name: f.name },
        },
      )
      setQuery(ds.id)
      setUploaded(`${f.name}: ${ds.rows} rows, columns ${ds.columns.join(', ')}`)
      if (!features) setFeatures(ds.columns.slice(0, -1).join(', '))
      if (!label) setLabel(ds.columns.at(-1) ?? '')
    }, 'Uploaded.')
  }
  const start = () =>
    act
      .run(
        () =>
          api.post(`/api/ml-models/${enc(model.id)}/train`, {
            datasetConfig: {
              source,
              query,
              features: features
                .split(',')
                .map((s) => s.trim())
                .filter(Boolean),
              label: label.trim() || undefined,
            },
          }),
        'Training started.',
      )
      .then((ok) => ok && onStarted())
  return html`<${Form} label="Train" onSubmit=${start}>
    <div class="grid3">
      <${Select} label="Training data" value=${source} options=${[['csv', 'An uploaded CSV'], ['events', 'Events of this game']]} onValue=${setSource} />
      ${
        source === 'csv'
          ? html`<div class="field">
              <label for="ml-csv">CSV file (header line first)</label>
              <input id="ml-csv" type="file" accept=".csv,text/csv" onChange=${upload} />
              ${uploaded && html`<small class="hint">${uploaded}</small>`}
            </div>`
          : html`<${Input} label="Events" value=${query} onValue=${setQuery} placeholder="event=session_end&env=prod" hint="event=<names>&env=<env>&from=&to=" />`
      }
      <${Input} label="Features" value=${features} onValue=${setFeatures} hint="Comma-separated columns or event fields." />
      <${Input} label="Label" value=${label} onValue=${setLabel} hint="A column, or churn:7d, payer:7d, next:<event>:7d." />
    </div>
    <${ActionNote} action=${act} />
    <div><button type="submit" disabled=${act.busy || !query}>Start training</button></div>
  <//>`
}

function Jobs({ id, round, onFinished }: { id: string; round: number; onFinished: () => void }): VNode {
  const jobs = useApi(
    (signal) => api.get<Paged<Job>>(`/api/ml-models/${enc(id)}/training-jobs`, { size: 10 }, signal),
    [id, round],
  )
  const live = jobs.data?.items.some((j) => j.status === 'pending' || j.status === 'running') ?? false
  const was = useRef(false)
  const finished = useRef(onFinished)
  finished.current = onFinished
  useInterval(jobs.reload, 1000, live)
  // A job that ends changes the model (status, versions): read it again once.
  useEffect(() => {
    if (was.current && !live) finished.current()
    was.current = live
  }, [live])
  return html`<${Async}
    state=${jobs}
    what="training jobs"
    isEmpty=${(d: Paged<Job>) => d.items.length === 0}
    empty=${html`<p>Not trained yet.</p>`}
    render=${(d: Paged<Job>) => html`<ul class="jobs">
      ${d.items.map(
        (j) => html`<li>
          <div><${Badge} value=${j.status} /> ${when(j.createdAt)}${j.version ? ` → version ${j.version}` : ''} · ${j.datasetConfig.source} ${j.rowsUsed ? `(${num(j.rowsUsed, 0)} rows)` : ''}</div>
          ${
            (j.status === 'running' || j.status === 'pending') &&
            html`<label class="progress">${j.stage || j.status} <progress max="1" value=${j.progress}>${pct(j.progress, 0)}</progress> ${pct(j.progress, 0)}</label>`
          }
          ${j.metrics && html`<div class="hint">${metricText(j.metrics)}</div>`}
          ${j.error && html`<div class="field-error">${j.error}</div>`}
        </li>`,
      )}
    </ul>`}
  />`
}

function Deploy({
  model,
  versions,
  onDone,
}: { model: Model; versions: Version[]; onDone: () => void }): VNode {
  const [version, setVersion] = useState(String(versions[0]?.version ?? ''))
  const [canary, setCanary] = useState(false)
  const act = useAction()
  return html`<${Form}
    label="Deploy"
    class="inline"
    onSubmit=${() => act.run(() => api.post(`/api/ml-models/${enc(model.id)}/deploy`, { version: Number(version), canaryDeployment: canary }), `Version ${version} deployed.`).then((ok) => ok && onDone())}
  >
    <${Select} label="Version" value=${version} options=${versions.map((v) => [String(v.version), `${v.version} (${v.status})`] as const)} onValue=${setVersion} />
    <${Check} label="As a canary (a share of entities)" checked=${canary} onValue=${setCanary} />
    <button type="submit" disabled=${act.busy || !version}>Deploy</button>
    <${ActionNote} action=${act} />
  <//>`
}

function Predict({ model, features }: { model: Model; features: string[] }): VNode {
  const [values, setValues] = useState<Record<string, string>>({})
  const [entity, setEntity] = useState('')
  const [out, setOut] = useState<Prediction>()
  const act = useAction()
  const run = () =>
    act.run(async () => {
      const f = Object.fromEntries(
        features.map((k) => [
          k,
          values[k] === undefined || values[k] === ''
            ? 0
            : Number.isNaN(Number(values[k]))
              ? values[k]
              : Number(values[k]),
        ]),
      )
      setOut(
        await api.post<Prediction>(`/api/ml-models/${enc(model.id)}/predict`, {
          features: f,
          entityId: entity || undefined,
        }),
      )
    })
  return html`<${Form} label="Predict" onSubmit=${run}>
    <div class="grid3">
      ${features.map((k) => html`<${Input} label=${k} value=${values[k] ?? ''} onValue=${(v: string) => setValues({ ...values, [k]: v })} inputmode="decimal" />`)}
      <${Input} label="Entity id (optional)" value=${entity} onValue=${setEntity} hint="Picks the canary or A/B arm for this entity." />
    </div>
    <${ActionNote} action=${act} />
    <div><button type="submit" disabled=${act.busy}>Predict</button></div>
    ${
      out &&
      html`<div class="preview" aria-live="polite">
        <p><strong>Prediction: ${out.prediction}</strong>${out.value !== undefined ? ` (${num(out.value)})` : ''}</p>
        <p>Probability ${pct(out.probability)} · confidence ${pct(out.confidence)} · version ${out.version} (${out.arm}) · ${num(out.latencyMs)} ms</p>
      </div>`
    }
  <//>`
}

/** `#/ml/{id}`: a model: train with progress, versions and their metrics, deploy, predict. */
export function ModelDetail({ id }: { id: string }): VNode {
  const state = useApi((signal) => api.get<Model>(`/api/ml-models/${enc(id)}`, undefined, signal), [id])
  const versions = useApi(
    (signal) => api.get<Version[]>(`/api/ml-models/${enc(id)}/versions`, undefined, signal),
    [id],
  )
  // A started job is read at once (then polled while it runs).
  const [round, setRound] = useState(0)
  const refresh = () => {
    state.reload()
    versions.reload()
  }
  const serving = versions.data?.find((v) => v.status === 'serving') ?? versions.data?.[0]
  return html`<${Page} title=${state.data?.name ?? 'Model'}>
    <p><a href="#/ml">All models</a></p>
    <${Async}
      state=${state}
      what="the model"
      render=${(m: Model) => html`
        <${Section} title="Status">
          <p><${Badge} value=${m.status} /></p>
          <${Facts}
            items=${[
              ['Type', m.type],
              ['Algorithm', m.algorithm],
              ['Versions trained', m.trainedVersion ?? 0],
              ['Serving', m.deployedVersion ? `version ${m.deployedVersion}` : 'nothing'],
              ['Metrics', metricText(m.metrics)],
            ]}
          />
        <//>
        <${Can} perm="ml:write"><${Section} title="Train"><${Train}
            model=${m}
            onStarted=${() => {
              setRound((n) => n + 1)
              refresh()
            }}
          /><//><//>
        <${Section} title="Training jobs"><${Jobs} id=${m.id} round=${round} onFinished=${refresh} /><//>
        <${Section} title="Versions">
          <${Async}
            state=${versions}
            what="versions"
            isEmpty=${(d: Version[]) => d.length === 0}
            empty=${html`<p>No trained version yet.</p>`}
            render=${(d: Version[]) => html`<${Table}
                caption="Versions"
                hideCaption
                rows=${d}
                rowKey=${(v: Version) => String(v.version)}
                columns=${[
                  { label: 'Version', value: (v: Version) => v.version, numeric: true },
                  { label: 'Status', value: (v: Version) => html`<${Badge} value=${v.status} />` },
                  { label: 'Metrics', value: (v: Version) => metricText(v.metrics) },
                  { label: 'Features', value: (v: Version) => v.datasetConfig.features.join(', ') },
                  { label: 'Trained', value: (v: Version) => when(v.createdAt) },
                ]}
              />
              <${Can} perm="ml:write"><${Deploy} model=${m} versions=${d} onDone=${refresh} /><//>`}
          />
        <//>
        ${
          m.deployedVersion &&
          serving &&
          html`<${Can} perm="ml-serving:write"><${Section} title="Predict"><${Predict} model=${m} features=${serving.datasetConfig.features} /><//><//>`
        }
      `}
    />
  <//>`
}

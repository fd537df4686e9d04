import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useState } from 'preact/hooks'
import { Form, Input, Select } from '../components/form'
import { Table } from '../components/table'
import { ActionNote, Async, Can, Section } from '../components/ui'
import { api } from '../lib/api'
import { pct } from '../lib/format'
import { useAction, useApi } from '../lib/hooks'
import { loadEnvironments, scope } from '../lib/scope'
import type { EnvSettings, Environment } from '../lib/types'

const PII = ['allow', 'deny', 'mask', 'drop'] as const
const TYPES = ['DEVELOPMENT', 'STAGING', 'PRODUCTION'] as const

function CreateEnvironment({ gameId, onDone }: { gameId: string; onDone: () => void }): VNode {
  const [name, setName] = useState('')
  const [type, setType] = useState<string>('STAGING')
  const act = useAction()
  const valid = /^[a-z][a-z0-9-]{0,31}$/.test(name)
  const submit = async () => {
    if (!valid) return
    if (
      await act.run(
        () => api.post(`/api/games/${encodeURIComponent(gameId)}/environments`, { name, type }),
        'Created.',
      )
    ) {
      setName('')
      onDone()
    }
  }
  return html`<${Form} label="Add an environment" onSubmit=${submit} class="inline">
    <${Input}
      label="New environment"
      value=${name}
      onValue=${setName}
      hint="Lower case letters, digits and dashes, starting with a letter."
      error=${name && !valid ? 'Lower case letters, digits and dashes, starting with a letter.' : undefined}
    />
    <${Select} label="Type" value=${type} options=${TYPES} onValue=${setType} />
    <button type="submit" disabled=${act.busy || !valid}>Add environment</button>
    <${ActionNote} action=${act} />
  <//>`
}

/** The settings of one environment: sampling, rate limits, PII policy, allow-list, retention. */
function SettingsEditor({
  gameId,
  env,
  onSaved,
}: { gameId: string; env: Environment; onSaved: () => void }): VNode {
  const [s, set] = useState<EnvSettings>(env.settings)
  const [allow, setAllow] = useState(env.settings.propertyAllowList.join(', '))
  const act = useAction()
  const rate = (k: keyof EnvSettings['rateLimit']) => (v: string) =>
    set({ ...s, rateLimit: { ...s.rateLimit, [k]: Number(v) } })
  const save = () =>
    act
      .run(
        () =>
          api.put(
            `/api/games/${encodeURIComponent(gameId)}/environments/${encodeURIComponent(env.name)}/settings`,
            {
              ...s,
              propertyAllowList: allow
                .split(',')
                .map((x) => x.trim())
                .filter(Boolean),
            },
          ),
        'Settings saved.',
      )
      .then((ok) => ok && onSaved())
  return html`<${Form} label=${`Settings of ${env.name}`} onSubmit=${save}>
    <div class="grid3">
      <${Input}
        label="Sampling rate"
        type="number"
        min=${0}
        max=${1}
        step="0.01"
        value=${s.samplingRate}
        onValue=${(v: string) => set({ ...s, samplingRate: Number(v) })}
        hint="Share of events kept, 0 to 1."
      />
      <${Input} label="Retention (days)" type="number" min=${1} max=${3650} value=${s.retentionDays} onValue=${(v: string) => set({ ...s, retentionDays: Number(v) })} />
      <${Input} label="Requests per minute per key" type="number" min=${0} value=${s.rateLimit.requestsPerMinutePerKey} onValue=${rate('requestsPerMinutePerKey')} />
      <${Input} label="Burst per second per key" type="number" min=${0} value=${s.rateLimit.burstPerSecondPerKey} onValue=${rate('burstPerSecondPerKey')} />
      <${Input} label="Requests per minute per IP" type="number" min=${0} value=${s.rateLimit.requestsPerMinutePerIp} onValue=${rate('requestsPerMinutePerIp')} />
      ${(['email', 'phone', 'ip'] as const).map(
        (k) => html`<${Select}
          label=${`PII: ${k}`}
          value=${s.pii[k]}
          options=${PII}
          onValue=${(v: string) => set({ ...s, pii: { ...s.pii, [k]: v } })}
        />`,
      )}
    </div>
    <${Input}
      label="Property allow-list"
      value=${allow}
      onValue=${setAllow}
      hint="Comma-separated property names; empty keeps every property."
    />
    <${ActionNote} action=${act} />
    <button type="submit" disabled=${act.busy}>Save settings</button>
  <//>`
}

/** A game's environments: list, add, remove, and each one's settings. */
export function Environments({ gameId }: { gameId: string }): VNode {
  const list = useApi(
    (signal) =>
      api.get<Environment[]>(`/api/games/${encodeURIComponent(gameId)}/environments`, undefined, signal),
    [gameId],
  )
  const [editing, setEditing] = useState<string>()
  const del = useAction()
  const changed = () => {
    list.reload()
    if (scope.get().gameId === gameId) void loadEnvironments(gameId)
  }
  const remove = (name: string) =>
    del
      .run(
        () => api.del(`/api/games/${encodeURIComponent(gameId)}/environments/${encodeURIComponent(name)}`),
        `Deleted ${name}.`,
      )
      .then((ok) => ok && changed())
  return html`<${Section} title="Environments">
    <${Async}
      state=${list}
      what="environments"
      isEmpty=${(d: Environment[]) => d.length === 0}
      empty=${html`<p>This game has no environment.</p>`}
      render=${(d: Environment[]) => html`<${Table}
          caption="Environments"
          hideCaption
          rows=${d}
          rowKey=${(e: Environment) => e.name}
          columns=${[
            { label: 'Name', value: (e: Environment) => html`<strong>${e.name}</strong>` },
            { label: 'Type', value: (e: Environment) => e.type },
            { label: 'Sampling', value: (e: Environment) => pct(e.settings.samplingRate, 0), numeric: true },
            { label: 'Retention', value: (e: Environment) => `${e.settings.retentionDays} d`, numeric: true },
            {
              label: 'PII (email, phone, ip)',
              value: (e: Environment) =>
                `${e.settings.pii.email}, ${e.settings.pii.phone}, ${e.settings.pii.ip}`,
            },
            { label: 'API keys', value: (e: Environment) => e.apiKeys.length, numeric: true },
            {
              label: 'Actions',
              value: (e: Environment) => html`<${Can} perm="environments:write">
                <div class="buttons">
                  <button type="button" class="secondary small" aria-expanded=${editing === e.name ? 'true' : 'false'} onClick=${() => setEditing(editing === e.name ? undefined : e.name)}>
                    Settings<span class="sr-only"> of ${e.name}</span>
                  </button>
                  <button type="button" class="danger small" onClick=${() => remove(e.name)} disabled=${del.busy}>
                    Delete<span class="sr-only"> ${e.name}</span>
                  </button>
                </div>
              <//>`,
            },
          ]}
        />
        ${
          editing &&
          d.some((e) => e.name === editing) &&
          html`<${Section} title=${`Settings of ${editing}`}>
          <${SettingsEditor} key=${editing} gameId=${gameId} env=${d.find((e) => e.name === editing)} onSaved=${list.reload} />
        <//>`
        }`}
    />
    <${ActionNote} action=${del} />
    <${Can} perm="environments:write"><${CreateEnvironment} gameId=${gameId} onDone=${changed} /><//>
  <//>`
}

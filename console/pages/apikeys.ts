import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useState } from 'preact/hooks'
import { Form, Input, Select } from '../components/form'
import { Secret, Table } from '../components/table'
import { ActionNote, Async, Badge, Can, Page, Section } from '../components/ui'
import { api } from '../lib/api'
import { when } from '../lib/format'
import { useAction, useApi } from '../lib/hooks'
import { navigate } from '../lib/router'
import { useScope } from '../lib/scope'
import type { ApiKey, Environment } from '../lib/types'

function CreateKey({ gameId, onCreated }: { gameId: string; onCreated: (k: ApiKey) => void }): VNode {
  const envs = useApi(
    (signal) =>
      api.get<Environment[]>(`/api/games/${encodeURIComponent(gameId)}/environments`, undefined, signal),
    [gameId],
  )
  const [name, setName] = useState('')
  const [env, setEnv] = useState('prod')
  const act = useAction()
  const submit = async () => {
    if (!name.trim()) return
    await act.run(async () => {
      onCreated(await api.post<ApiKey>('/api/api-keys', { name: name.trim(), gameId, environment: env }))
      setName('')
    })
  }
  return html`<${Form} label="New API key" onSubmit=${submit} class="inline">
    <${Input} label="Key name" value=${name} onValue=${setName} required hint="Where the key is used, for example the Android build." />
    <${Select} label="Environment" value=${env} options=${(envs.data ?? []).map((e) => e.name)} onValue=${setEnv} />
    <button type="submit" disabled=${act.busy || !name.trim()}>Create key</button>
    <${ActionNote} action=${act} />
  <//>`
}

/** `#/api-keys`: the SDK keys of a game; a new key is shown once, with a copy button. */
export function ApiKeys({ query }: { query: URLSearchParams }): VNode {
  const s = useScope()
  const gameId = query.get('game') ?? s.gameId
  const [fresh, setFresh] = useState<ApiKey>()
  const keys = useApi(
    (signal) => (gameId ? api.get<ApiKey[]>('/api/api-keys', { gameId }, signal) : undefined),
    [gameId],
  )
  const revoke = useAction()
  const game = s.games?.find((g) => g.id === gameId)
  return html`<${Page} title="API keys">
    <p>
      SDK keys of <strong>${game?.name ?? 'the chosen game'}</strong>: each is bound to one environment and sent as
      <code>x-api-key</code>. The key itself is shown once, when it is made.
    </p>
    ${
      s.games &&
      s.games.length > 1 &&
      html`<div class="filters">
      <${Select}
        label="Game"
        value=${gameId ?? ''}
        options=${s.games.map((g) => [g.id, g.name] as const)}
        onValue=${(v: string) => navigate('/api-keys', { game: v })}
      />
    </div>`
    }
    ${
      fresh?.key &&
      html`<${Section} title="New key: copy it now">
      <${Secret} label=${`API key "${fresh.name}" for ${fresh.environment}`} value=${fresh.key} />
      <p class="hint">It is stored hashed: the console cannot show it again.</p>
      <button type="button" class="secondary" onClick=${() => setFresh(undefined)}>I have copied it</button>
    <//>`
    }
    ${
      gameId &&
      html`<${Can} perm="apikeys:write">
      <${Section} title="New key">
        <${CreateKey}
          gameId=${gameId}
          onCreated=${(k: ApiKey) => {
            setFresh(k)
            keys.reload()
          }}
        />
      <//>
    <//>`
    }
    <${Async}
      state=${keys}
      what="API keys"
      isEmpty=${(d: ApiKey[]) => d.length === 0}
      empty=${html`<p>${gameId ? 'This game has no API key yet.' : 'Create a game first.'}</p>`}
      render=${(d: ApiKey[]) => html`<${Table}
        caption="API keys"
        rows=${d}
        rowKey=${(k: ApiKey) => k.id}
        columns=${[
          { label: 'Name', value: (k: ApiKey) => k.name },
          { label: 'Environment', value: (k: ApiKey) => k.environment ?? '–' },
          { label: 'Starts with', value: (k: ApiKey) => html`<code>${k.prefix}…</code>` },
          { label: 'Created', value: (k: ApiKey) => when(k.createdAt) },
          { label: 'Last used', value: (k: ApiKey) => when(k.lastUsedAt) },
          {
            label: 'State',
            value: (k: ApiKey) =>
              k.revokedAt
                ? html`<${Badge} value="revoked" tone="bad" />`
                : html`<${Can} perm="apikeys:write">
                    <button
                      type="button"
                      class="danger small"
                      disabled=${revoke.busy}
                      onClick=${() => revoke.run(() => api.del(`/api/api-keys/${k.id}`), 'Revoked.').then(keys.reload)}
                    >
                      Revoke<span class="sr-only"> ${k.name}</span>
                    </button>
                  <//>`,
          },
        ]}
      />`}
    />
    <${ActionNote} action=${revoke} />
  <//>`
}

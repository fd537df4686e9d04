import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useState } from 'preact/hooks'
import { Checks, Form, Input, Select, TextArea } from '../components/form'
import { Pager, Table } from '../components/table'
import { ActionNote, Async, Badge, Can, Page, Section } from '../components/ui'
import { api } from '../lib/api'
import { when } from '../lib/format'
import { useAction, useApi } from '../lib/hooks'
import { href, navigate } from '../lib/router'
import { choose, loadGames } from '../lib/scope'
import { GENRES, type Game, type GameStatus, PLATFORMS, type Page as Paged } from '../lib/types'

const STATUSES: GameStatus[] = ['DEVELOPMENT', 'TESTING', 'LIVE', 'MAINTENANCE', 'DISCONTINUED']
const SIZE = 20
const localZone = () => Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC'

/** The game fields a form edits; `validateGame` names what the API would refuse. */
export type GameDraft = Pick<
  Game,
  'name' | 'genre' | 'platforms' | 'timezone' | 'defaultCurrency' | 'description'
>

export function validateGame(d: GameDraft): Record<string, string> {
  const e: Record<string, string> = {}
  if (!d.name.trim()) e.name = 'A name is needed.'
  if (!/^[A-Z]{3}$/.test(d.defaultCurrency)) e.defaultCurrency = 'Three capital letters, for example USD.'
  if (!d.timezone.trim()) e.timezone = 'An IANA time zone, for example Europe/Paris.'
  return e
}

/** The fields of a game, for creating one and for editing it. */
export function GameFields({
  d,
  set,
  errors,
}: { d: GameDraft; set: (d: GameDraft) => void; errors: Record<string, string> }): VNode {
  return html`<div class="grid2">
    <${Input} label="Name" value=${d.name} onValue=${(name: string) => set({ ...d, name })} required error=${errors.name} />
    <${Select} label="Genre" value=${d.genre} options=${GENRES} onValue=${(genre: string) => set({ ...d, genre })} />
    <${Input}
      label="Time zone"
      value=${d.timezone}
      onValue=${(timezone: string) => set({ ...d, timezone })}
      hint="Days in the analytics are this zone's days."
      error=${errors.timezone}
      required
    />
    <${Input}
      label="Currency"
      value=${d.defaultCurrency}
      onValue=${(v: string) => set({ ...d, defaultCurrency: v.toUpperCase() })}
      error=${errors.defaultCurrency}
      required
    />
    <${Checks}
      legend="Platforms"
      options=${PLATFORMS}
      values=${d.platforms}
      onValues=${(platforms: string[]) => set({ ...d, platforms })}
      hint="A game needs a platform before it can go live."
    />
    <${TextArea} label="Description" value=${d.description} onValue=${(description: string) => set({ ...d, description })} rows=${2} />
  </div>`
}

function CreateGame({ onDone }: { onDone: () => void }): VNode {
  const [d, set] = useState<GameDraft>({
    name: '',
    genre: 'CASUAL',
    platforms: [],
    timezone: localZone(),
    defaultCurrency: 'USD',
    description: '',
  })
  const [errors, setErrors] = useState<Record<string, string>>({})
  const act = useAction()
  const submit = async () => {
    const e = validateGame(d)
    setErrors(e)
    if (Object.keys(e).length) return
    let created: Game | undefined
    const ok = await act.run(async () => {
      created = await api.post<Game>('/api/games', {
        ...d,
        name: d.name.trim(),
        description: d.description || undefined,
      })
    })
    if (ok && created) {
      await loadGames()
      choose(created.id)
      onDone()
      navigate(`/games/${created.id}`)
    }
  }
  return html`<${Section} title="New game">
    <${Form} label="New game" onSubmit=${submit}>
      <${GameFields} d=${d} set=${set} errors=${errors} />
      <${ActionNote} action=${act} />
      <div class="buttons">
        <button type="submit" disabled=${act.busy}>Create game</button>
        <button type="button" class="secondary" onClick=${onDone}>Cancel</button>
      </div>
    <//>
  <//>`
}

/** `#/games`: every game, filtered by status, paged; a new one for those who may write games. */
export function Games({ query }: { query: URLSearchParams }): VNode {
  const page = Number(query.get('page') ?? 0)
  const status = query.get('status') ?? ''
  const [creating, setCreating] = useState(false)
  const list = useApi(
    (signal) => api.get<Paged<Game>>('/api/games', { page, size: SIZE, status, sort: 'name,asc' }, signal),
    [page, status],
  )
  const pages = list.data ? Math.max(1, Math.ceil(list.data.total / SIZE)) : 1
  return html`<${Page}
    title="Games"
    actions=${html`<${Can} perm="games:write">
      <button type="button" onClick=${() => setCreating(true)} disabled=${creating}>New game</button>
    <//>`}
  >
    ${creating && html`<${CreateGame} onDone=${() => setCreating(false)} />`}
    <div class="filters">
      <${Select}
        label="Status"
        value=${status}
        placeholder="Any status"
        options=${STATUSES}
        onValue=${(v: string) => navigate('/games', { status: v })}
      />
    </div>
    <${Async}
      state=${list}
      what="games"
      isEmpty=${(d: Paged<Game>) => d.items.length === 0}
      empty=${html`<p>${status ? `No game is ${status}.` : 'No game yet.'}</p>`}
      render=${(d: Paged<Game>) => html`
        <${Table}
          caption=${`Games (${d.total})`}
          rows=${d.items}
          rowKey=${(g: Game) => g.id}
          columns=${[
            { label: 'Name', value: (g: Game) => html`<a href=${href(`/games/${g.id}`)}>${g.name}</a>` },
            { label: 'Status', value: (g: Game) => html`<${Badge} value=${g.status} />` },
            { label: 'Genre', value: (g: Game) => g.genre },
            { label: 'Platforms', value: (g: Game) => g.platforms.join(', ') || '–' },
            { label: 'Time zone', value: (g: Game) => g.timezone },
            { label: 'Updated', value: (g: Game) => when(g.updatedAt) },
          ]}
        />
        <${Pager}
          page=${page}
          pages=${pages}
          label="Pages of games"
          to=${(n: number) => href('/games', { status, page: String(n) })}
        />
      `}
    />
  <//>`
}

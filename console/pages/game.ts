import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useEffect, useState } from 'preact/hooks'
import { Form } from '../components/form'
import { ActionNote, Async, Badge, Can, Facts, Page, Section } from '../components/ui'
import { api } from '../lib/api'
import { when } from '../lib/format'
import { useAction, useApi } from '../lib/hooks'
import { href, navigate } from '../lib/router'
import { loadGames } from '../lib/scope'
import { type Game, type GameStatus, NEXT_STATUS } from '../lib/types'
import { Environments } from './environments'
import { type GameDraft, GameFields, validateGame } from './games'

const ACTION_WORDS: Partial<Record<GameStatus, string>> = {
  TESTING: 'Move to testing',
  LIVE: 'Publish (go live)',
  MAINTENANCE: 'Unpublish (maintenance)',
  DEVELOPMENT: 'Back to development',
  DISCONTINUED: 'Discontinue',
}

/** The moves the API allows from a status; going live and leaving it use publish and unpublish. */
function StatusMoves({ game, onChanged }: { game: Game; onChanged: (g: Game) => void }): VNode {
  const act = useAction()
  const base = `/api/games/${encodeURIComponent(game.id)}`
  const move = (to: GameStatus) =>
    act.run(async () => {
      const g =
        to === 'LIVE'
          ? await api.post<Game>(`${base}/publish`)
          : to === 'MAINTENANCE' && game.status === 'LIVE'
            ? await api.post<Game>(`${base}/unpublish`)
            : await api.put<Game>(base, { status: to })
      onChanged(g)
    }, `Now ${to}.`)
  const next = NEXT_STATUS[game.status]
  return html`<div class="status-moves">
    <p>Status: <${Badge} value=${game.status} /></p>
    <${Can} perm="games:write">
      <div class="buttons">
        ${next.length === 0 && html`<span class="hint">No status change is possible from ${game.status}.</span>`}
        ${next.map(
          (to) => html`<button
            type="button"
            class=${to === 'DISCONTINUED' ? 'danger' : 'secondary'}
            disabled=${act.busy}
            onClick=${() => move(to)}
          >
            ${ACTION_WORDS[to] ?? to}
          </button>`,
        )}
      </div>
      <${ActionNote} action=${act} />
    <//>
  </div>`
}

function EditGame({ game, onSaved }: { game: Game; onSaved: (g: Game) => void }): VNode {
  const [d, set] = useState<GameDraft>(game)
  const [errors, setErrors] = useState<Record<string, string>>({})
  const act = useAction()
  useEffect(() => set(game), [game])
  const save = async () => {
    const e = validateGame(d)
    setErrors(e)
    if (Object.keys(e).length) return
    await act.run(async () => {
      const { name, genre, platforms, timezone, defaultCurrency, description } = d
      onSaved(
        await api.put<Game>(`/api/games/${encodeURIComponent(game.id)}`, {
          name,
          genre,
          platforms,
          timezone,
          defaultCurrency,
          description,
        }),
      )
      await loadGames()
    }, 'Saved.')
  }
  return html`<${Form} label="Edit game" onSubmit=${save}>
    <${GameFields} d=${d} set=${set} errors=${errors} />
    <${ActionNote} action=${act} />
    <button type="submit" disabled=${act.busy}>Save changes</button>
  <//>`
}

function DeleteGame({ game }: { game: Game }): VNode {
  const [sure, setSure] = useState(false)
  const act = useAction()
  const del = async () => {
    if (await act.run(() => api.del(`/api/games/${encodeURIComponent(game.id)}`))) {
      await loadGames()
      navigate('/games')
    }
  }
  return html`<div class="danger-zone">
    ${
      sure
        ? html`<p>Delete <strong>${game.name}</strong>, its environments and API keys?</p>
            <div class="buttons">
              <button type="button" class="danger" onClick=${del} disabled=${act.busy}>Yes, delete it</button>
              <button type="button" class="secondary" onClick=${() => setSure(false)}>Keep it</button>
            </div>`
        : html`<button type="button" class="danger" onClick=${() => setSure(true)}>Delete game…</button>`
    }
    <${ActionNote} action=${act} />
  </div>`
}

/** `#/games/{id}`: a game, its status moves, its fields, its environments and their settings. */
export function GameDetail({ id }: { id: string }): VNode {
  const state = useApi(
    (signal) => api.get<Game>(`/api/games/${encodeURIComponent(id)}`, undefined, signal),
    [id],
  )
  const [game, setGame] = useState<Game>()
  useEffect(() => setGame(state.data), [state.data])
  const shown = game && { ...state, data: game }
  return html`<${Page}
    title=${game?.name ?? 'Game'}
    actions=${html`<a class="button secondary" href=${href('/api-keys', { game: id })}>API keys</a>`}
  >
    <${Async}
      state=${shown ?? state}
      what="the game"
      render=${(g: Game) => html`
        <${Section} title="Status">
          <${StatusMoves} game=${g} onChanged=${setGame} />
          <${Facts}
            items=${[
              ['Id', html`<code>${g.id}</code>`],
              ['Genre', g.genre],
              ['Platforms', g.platforms.join(', ') || 'none'],
              ['Time zone', g.timezone],
              ['Currency', g.defaultCurrency],
              ['Description', g.description || '–'],
              ['Created', when(g.createdAt)],
              ['Updated', when(g.updatedAt)],
            ]}
          />
        <//>
        <${Can} perm="games:write">
          <${Section} title="Details"><${EditGame} game=${g} onSaved=${setGame} /><//>
        <//>
        <${Environments} gameId=${g.id} />
        <${Can} perm="games:write">
          <${Section} title="Delete"><${DeleteGame} game=${g} /><//>
        <//>
      `}
    />
  <//>`
}

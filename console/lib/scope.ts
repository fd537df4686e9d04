import { useEffect } from 'preact/hooks'
import { api } from './api'
import { Store, useStore } from './store'
import type { Environment, Game, Page } from './types'

/** The game and environment the analytics, experiments and key pages look at. */
export interface Scope {
  gameId?: string
  env: string
}

export const games = new Store<Game[] | undefined>(undefined)
export const environments = new Store<Environment[] | undefined>(undefined)
export const scope = new Store<Scope>({ env: 'prod' })

/** Reads the games again (after a create, rename or delete) and keeps the choice when it still exists. */
export async function loadGames(): Promise<void> {
  const page = await api.get<Page<Game>>('/api/games', { size: 100, sort: 'name,asc' })
  games.set(page.items)
  const s = scope.get()
  if (!page.items.some((g) => g.id === s.gameId)) choose(page.items[0]?.id)
}

export async function loadEnvironments(gameId: string | undefined): Promise<void> {
  if (!gameId) return environments.set([])
  const list = await api.get<Environment[]>(`/api/games/${encodeURIComponent(gameId)}/environments`)
  if (scope.get().gameId !== gameId) return
  environments.set(list)
  const env = scope.get().env
  if (list.length && !list.some((e) => e.name === env))
    scope.set({ gameId, env: list.find((e) => e.name === 'prod')?.name ?? list[0].name })
}

export function choose(gameId: string | undefined, env?: string): void {
  const prev = scope.get()
  scope.set({ gameId, env: env ?? prev.env })
  if (gameId !== prev.gameId) void loadEnvironments(gameId).catch(() => environments.set([]))
}

export function forget(): void {
  games.set(undefined)
  environments.set(undefined)
  scope.set({ env: 'prod' })
}

/** The chosen game and environment; loads the games on first use. */
export function useScope(): Scope & { game?: Game; games?: Game[] } {
  const s = useStore(scope)
  const list = useStore(games)
  useEffect(() => {
    if (!games.get()) void loadGames().catch(() => games.set([]))
  }, [])
  return { ...s, games: list, game: list?.find((g) => g.id === s.gameId) }
}

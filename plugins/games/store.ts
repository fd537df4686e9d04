import { type Db, newId } from '../../core/db'
import { Generation } from '../../core/generation'
import { Conflict, NotFound, parseSort } from '../../core/http'
import { ReadCache } from './read-cache'
import {
  DEFAULT_ENVIRONMENTS,
  ENV_COLS,
  type EnvRow,
  GAME_COLS,
  type GameRow,
  NEXT,
  SORTABLE,
  type Status,
  checkTimezone,
  completeSettings,
  mergeSettings,
  roomForEnvironment,
  toEnv,
  toGame,
} from './rows'
import { ENV_NAME_MAX, GAME_ID_MAX, type Game, type SettingsPatch } from './schema'
import type { Environment, GamesService } from './types'

/**
 * Games and environments. Reads by id go through a small cache kept current by this process's
 * writes and refreshed after `cacheTtlMs`, so other instances' writes show up within that bound.
 */
/** `local`: made by this instance (a change heard from another is not). */
export type GameChange = { gameId: string; environment?: string; deleted: boolean; local?: boolean }

export function gamesStore(db: Db, cacheTtlMs: number, publish: (c: GameChange) => void = () => undefined) {
  const games = new ReadCache<Game>(cacheTtlMs)
  const envs = new ReadCache<Environment>(cacheTtlMs)
  const listeners: Array<(c: GameChange) => void | Promise<void>> = []
  const tell = (c: GameChange) => Promise.all(listeners.map((fn) => fn(c)))
  /**
   * A change made here: listeners hear it, and so do other instances (`publish`). A deletion
   * answers after the listeners' promises settle, so what they delete with it (experiments) is gone
   * before the name can be created again.
   */
  const changed = (gameId: string, environment?: string, deleted = false) => {
    const heard = tell({ gameId, environment, deleted, local: true })
    publish({ gameId, environment, deleted })
    return heard
  }
  /**
   * Every change of the cached rows made here or heard of (`keepGame`, `keepEnv`, `forgetGame`). A
   * read for the cache under way meanwhile may be older than the change (on PostgreSQL it waits on
   * the network while the changing request runs); caching it would undo the change here for
   * `cacheTtlMs` (an environment's new PII policy not applied to the events it receives), so it is
   * read again (`changes.settled`).
   */
  const changes = new Generation()
  const keepGame = (id: string, game: Game) => {
    changes.bump()
    games.set(id, game)
  }
  const keepEnv = (key: string, env: Environment | undefined) => {
    changes.bump()
    if (env) envs.set(key, env)
    else envs.delete(key)
  }

  async function findGame(id: string): Promise<Game | null> {
    // No game has such an id: answered without a read, and not remembered.
    if (id.length > GAME_ID_MAX) return null
    const c = games.get(id)
    if (c !== undefined) return c
    const { value: row, settled } = await changes.settled(() =>
      db.get<GameRow>(`SELECT ${GAME_COLS} FROM games WHERE id = ?`, [id]),
    )
    const game = row ? toGame(row) : null
    if (settled) games.set(id, game)
    return game
  }

  async function getGame(id: string): Promise<Game> {
    const g = await findGame(id)
    if (!g) throw new NotFound(`game '${id}' not found`)
    return g
  }

  async function findEnv(gameId: string, name: string): Promise<Environment | null> {
    if (gameId.length > GAME_ID_MAX || name.length > ENV_NAME_MAX) return null
    const key = `${gameId}/${name}`
    const c = envs.get(key)
    if (c !== undefined) return c
    const { value: row, settled } = await changes.settled(() =>
      db.get<EnvRow>(`SELECT ${ENV_COLS} FROM environments WHERE game_id = ? AND name = ?`, [gameId, name]),
    )
    const env = row ? toEnv(row) : null
    if (settled) envs.set(key, env)
    return env
  }

  async function getEnv(gameId: string, name: string): Promise<Environment> {
    await getGame(gameId)
    const e = await findEnv(gameId, name)
    if (!e) throw new NotFound(`environment '${name}' of game '${gameId}' not found`)
    return e
  }

  function forgetGame(id: string) {
    changes.bump()
    games.delete(id)
    envs.deletePrefixed(`${id}/`)
  }

  /** Compare-and-set on status, so two concurrent transitions cannot both win. */
  async function moveStatus(id: string, to: Status, check: (g: Game) => void): Promise<Game> {
    const game = await db.tx(async (tx) => {
      const row = await tx.get<GameRow>(`SELECT ${GAME_COLS} FROM games WHERE id = ?`, [id])
      if (!row) throw new NotFound(`game '${id}' not found`)
      check(toGame(row))
      const updated = await tx.get<GameRow>(
        `UPDATE games SET status = ?, updated_at = ? WHERE id = ? AND status = ? RETURNING ${GAME_COLS}`,
        [to, Date.now(), id, row.status],
      )
      if (!updated) throw new Conflict(`game '${id}' changed concurrently; retry`)
      return toGame(updated)
    })
    keepGame(id, game)
    changed(id)
    return game
  }

  const needsPlatform = (g: Game) => {
    if (!g.platforms.length)
      throw new Conflict(`game '${g.id}' has no platform; add one before going LIVE`, { field: 'platforms' })
  }

  const service: GamesService = {
    environment: async (gameId, name) => (await findEnv(gameId, name)) ?? undefined,
    gameExists: async (gameId) => !!(await findGame(gameId)),
    timezone: async (gameId) => (await findGame(gameId))?.timezone,
    environments: async () =>
      (await db.all<EnvRow>(`SELECT ${ENV_COLS} FROM environments ORDER BY game_id, name`)).map(toEnv),
    onChange: (fn) => {
      listeners.push(fn)
    },
  }

  return {
    service,
    getGame,
    getEnv,
    /** Keys the read caches hold: rows found, and ids that named none (`MISSES_KEPT` at most). */
    cached: () => ({ games: games.size, environments: envs.size }),
    /** Another instance changed this game: its cached rows go, and listeners hear it. */
    changedElsewhere(c: GameChange) {
      forgetGame(c.gameId)
      void tell(c)
    },

    async createGame(input: {
      name: string
      genre: string
      platforms: string[]
      timezone: string
      defaultCurrency: string
      description?: string
    }) {
      checkTimezone(input.timezone)
      const id = newId()
      const now = Date.now()
      const game = await db.tx(async (tx) => {
        const row = await tx.get<GameRow>(
          `INSERT INTO games (${GAME_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, 'DEVELOPMENT', ?, ?) RETURNING ${GAME_COLS}`,
          [
            id,
            input.name.trim(),
            input.genre,
            JSON.stringify(input.platforms),
            input.timezone,
            input.defaultCurrency,
            input.description ?? '',
            now,
            now,
          ],
        )
        for (const e of DEFAULT_ENVIRONMENTS)
          await tx.run(`INSERT INTO environments (${ENV_COLS}) VALUES (?, ?, ?, ?, ?, '', ?, ?, ?)`, [
            newId(),
            id,
            e.name,
            e.type,
            e.displayName,
            JSON.stringify(completeSettings({ retentionDays: e.retentionDays })),
            now,
            now,
          ])
        return toGame(row!)
      })
      keepGame(id, game)
      changed(id)
      return game
    },

    async listGames(q: { page?: number; size?: number; sort?: string; status?: string; genre?: string }) {
      const page = q.page ?? 0
      const size = q.size ?? 20
      const order = parseSort(q.sort, SORTABLE, 'created_at DESC')
      const where = '(CAST(? AS TEXT) IS NULL OR status = ?) AND (CAST(? AS TEXT) IS NULL OR genre = ?)'
      const args = [q.status ?? null, q.status ?? null, q.genre ?? null, q.genre ?? null]
      const [rows, count] = await Promise.all([
        db.all<GameRow>(
          `SELECT ${GAME_COLS} FROM games WHERE ${where} ORDER BY ${order}, id LIMIT ? OFFSET ?`,
          [...args, size, page * size],
        ),
        db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM games WHERE ${where}`, args),
      ])
      return { items: rows.map(toGame), total: Number(count?.n ?? 0), page, size }
    },

    async updateGame(
      id: string,
      patch: {
        name?: string
        description?: string
        genre?: string
        platforms?: string[]
        timezone?: string
        defaultCurrency?: string
        status?: Status
      },
    ) {
      if (patch.timezone) checkTimezone(patch.timezone)
      const game = await db.tx(async (tx) => {
        const row = await tx.get<GameRow>(`SELECT ${GAME_COLS} FROM games WHERE id = ?`, [id])
        if (!row) throw new NotFound(`game '${id}' not found`)
        const current = toGame(row)
        const status = patch.status ?? current.status
        if (status !== current.status && !NEXT[current.status].includes(status))
          throw new Conflict(`status cannot change from ${current.status} to ${status}`, {
            field: 'status',
            from: current.status,
            to: status,
            allowed: NEXT[current.status],
          })
        const platforms = patch.platforms ?? current.platforms
        if (status === 'LIVE') needsPlatform({ ...current, platforms })
        const updated = await tx.get<GameRow>(
          `UPDATE games SET name = ?, description = ?, genre = ?, platforms = ?, timezone = ?, default_currency = ?, status = ?, updated_at = ?
           WHERE id = ? RETURNING ${GAME_COLS}`,
          [
            patch.name?.trim() ?? current.name,
            patch.description ?? current.description,
            patch.genre ?? current.genre,
            JSON.stringify(platforms),
            patch.timezone ?? current.timezone,
            patch.defaultCurrency ?? current.defaultCurrency,
            status,
            Date.now(),
            id,
          ],
        )
        return toGame(updated!)
      })
      keepGame(id, game)
      changed(id)
      return game
    },

    async deleteGame(id: string) {
      const n = await db.run(`DELETE FROM games WHERE id = ? AND status <> 'LIVE'`, [id])
      if (!n) {
        const g = await getGame(id)
        throw new Conflict(`game '${id}' is ${g.status}; unpublish it before deleting`, { field: 'status' })
      }
      forgetGame(id)
      await changed(id, undefined, true)
    },

    publish: (id: string) =>
      moveStatus(id, 'LIVE', (g) => {
        if (g.status === 'LIVE') throw new Conflict(`game '${id}' is already LIVE`)
        if (g.status === 'DISCONTINUED')
          throw new Conflict(`game '${id}' is DISCONTINUED and cannot be published`)
        needsPlatform(g)
      }),

    unpublish: (id: string) =>
      moveStatus(id, 'MAINTENANCE', (g) => {
        if (g.status !== 'LIVE')
          throw new Conflict(`game '${id}' is ${g.status}; only a LIVE game can be unpublished`)
      }),

    async listEnvs(gameId: string) {
      await getGame(gameId)
      return (
        await db.all<EnvRow>(
          `SELECT ${ENV_COLS} FROM environments WHERE game_id = ? ORDER BY created_at, name`,
          [gameId],
        )
      ).map(toEnv)
    },

    async createEnv(
      gameId: string,
      input: {
        name: string
        type: string
        displayName?: string
        description?: string
        settings?: SettingsPatch
      },
    ) {
      await getGame(gameId)
      const now = Date.now()
      const settings = mergeSettings(
        completeSettings({
          retentionDays: input.type === 'PRODUCTION' ? 365 : input.type === 'STAGING' ? 30 : 7,
        }),
        input.settings,
      )
      const row = await db.tx(async (tx) => {
        await roomForEnvironment(tx, gameId)
        return tx.get<EnvRow>(
          `INSERT INTO environments (${ENV_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (game_id, name) DO NOTHING RETURNING ${ENV_COLS}`,
          [
            newId(),
            gameId,
            input.name,
            input.type,
            input.displayName ?? input.name,
            input.description ?? '',
            JSON.stringify(settings),
            now,
            now,
          ],
        )
      })
      if (!row)
        throw new Conflict(`environment '${input.name}' already exists in game '${gameId}'`, {
          field: 'name',
        })
      const env = toEnv(row)
      keepEnv(`${gameId}/${env.name}`, env)
      changed(gameId, env.name)
      return env
    },

    async updateEnv(
      gameId: string,
      name: string,
      patch: { type?: string; displayName?: string; description?: string; settings?: SettingsPatch },
    ) {
      const env = await db.tx(async (tx) => {
        const row = await tx.get<EnvRow>(
          `SELECT ${ENV_COLS} FROM environments WHERE game_id = ? AND name = ?`,
          [gameId, name],
        )
        if (!row) {
          if (!(await tx.get('SELECT id FROM games WHERE id = ?', [gameId])))
            throw new NotFound(`game '${gameId}' not found`)
          throw new NotFound(`environment '${name}' of game '${gameId}' not found`)
        }
        const current = toEnv(row)
        const updated = await tx.get<EnvRow>(
          `UPDATE environments SET type = ?, display_name = ?, description = ?, settings = ?, updated_at = ? WHERE id = ? RETURNING ${ENV_COLS}`,
          [
            patch.type ?? current.type,
            patch.displayName ?? current.displayName,
            patch.description ?? current.description,
            JSON.stringify(mergeSettings(current.settings, patch.settings)),
            Date.now(),
            current.id,
          ],
        )
        return toEnv(updated!)
      })
      keepEnv(`${gameId}/${name}`, env)
      changed(gameId, name)
      return env
    },

    async deleteEnv(gameId: string, name: string) {
      await getGame(gameId)
      const n = await db.run('DELETE FROM environments WHERE game_id = ? AND name = ?', [gameId, name])
      if (!n) throw new NotFound(`environment '${name}' of game '${gameId}' not found`)
      keepEnv(`${gameId}/${name}`, undefined)
      await changed(gameId, name, true)
    },
  }
}

export type GamesStore = ReturnType<typeof gamesStore>

import { Elysia, t } from 'elysia'
import { KeyPage } from '../../core/auth/key-routes'
import type { ApiKey as ApiKeyRow } from '../../core/auth/sdk-keys'
import type { PluginContext } from '../../core/plugin'
import { rejectUnknown, withoutEchoed } from '../../core/strict'
import {
  ApiKey,
  ApiKeyCreate,
  ApiKeyCreated,
  EnvName,
  Environment,
  EnvironmentCreate,
  EnvironmentUpdate,
  Game,
  GameCreate,
  GameList,
  GameUpdate,
  ListQuery,
  SettingsPatch,
} from './schema'
import type { GamesStore } from './store'
import { EnvironmentSettings } from './types'

const tag = (summary: string, tags = ['games'], more: { description?: string } = {}) => ({
  tags,
  summary,
  ...more,
})
const GameParams = t.Object({ gameId: t.String() })
const EnvParams = t.Object({ gameId: t.String(), environmentName: EnvName })

export function gamesRoutes(ctx: PluginContext<unknown>, store: GamesStore) {
  const { auth } = ctx
  /** The API's form of a key bound to an environment (the key itself is shown only at creation). */
  const ref = (k: ApiKeyRow) => ({ id: k.id, name: k.name, prefix: k.prefix, createdAt: k.createdAt })
  /** The environment as the API shows it: with the active API keys bound to it. */
  const withKeys = async <E extends { gameId: string; name: string }>(env: E) => {
    const keys = await auth.listApiKeys({ gameId: env.gameId, environment: env.name, active: true })
    return { ...env, apiKeys: keys.map(ref) }
  }
  /** Every environment of a game with its keys: the game's active keys in one read, not one per environment. */
  const allWithKeys = async <E extends { gameId: string; name: string }>(gameId: string, envs: E[]) => {
    const byEnv = new Map<string, ReturnType<typeof ref>[]>()
    for (const k of await auth.listApiKeys({ gameId, active: true })) {
      if (k.environment === null) continue
      const list = byEnv.get(k.environment)
      if (list) list.push(ref(k))
      else byEnv.set(k.environment, [ref(k)])
    }
    return envs.map((env) => ({ ...env, apiKeys: byEnv.get(env.name) ?? [] }))
  }

  return new Elysia({ name: 'games' })
    .use(ctx.guard)
    .model({ 'games.Game': Game, 'games.Environment': Environment, 'games.ApiKey': ApiKey })
    .post(
      '/api/games',
      async ({ body, set }) => {
        set.status = 201
        return store.createGame(body)
      },
      {
        permission: 'games:write',
        transform: ({ body }) => rejectUnknown(GameCreate, body, 'body'),
        body: GameCreate,
        response: { 201: 'games.Game' },
        detail: tag('Create a game (status DEVELOPMENT) with dev, staging and prod environments'),
      },
    )
    .get('/api/games', ({ query }) => store.listGames(query), {
      permission: 'games:read',
      query: ListQuery,
      response: { 200: GameList },
      detail: tag('List games: page object {items, total, page, size}; sort=field[,asc|desc]'),
    })
    .get('/api/games/:gameId', ({ params }) => store.getGame(params.gameId), {
      permission: 'games:read',
      params: GameParams,
      response: { 200: 'games.Game' },
      detail: tag('Read a game'),
    })
    .put(
      '/api/games/:gameId',
      async ({ params, body }) =>
        store.updateGame(
          params.gameId,
          withoutEchoed(await store.getGame(params.gameId), body, ['id', 'createdAt'], ['updatedAt']),
        ),
      {
        permission: 'games:write',
        params: GameParams,
        transform: ({ body }) => rejectUnknown(GameUpdate, body, 'body'),
        body: GameUpdate,
        response: { 200: 'games.Game' },
        detail: tag(
          'Update a game; status changes follow DEVELOPMENT->TESTING, TESTING->LIVE|DEVELOPMENT, LIVE->MAINTENANCE, MAINTENANCE->LIVE|DISCONTINUED (else 409)',
        ),
      },
    )
    .delete(
      '/api/games/:gameId',
      async ({ params, set }) => {
        await store.deleteGame(params.gameId)
        await auth.revokeApiKeysOf(params.gameId)
        set.status = 204
      },
      {
        permission: 'games:write',
        params: GameParams,
        detail: tag(
          'Delete a game that is not LIVE (409 when LIVE); its API keys are revoked and its experiments deleted',
        ),
      },
    )
    .post('/api/games/:gameId/publish', ({ params }) => store.publish(params.gameId), {
      permission: 'games:write',
      params: GameParams,
      response: { 200: 'games.Game' },
      detail: tag('Move to LIVE; 409 when already LIVE, DISCONTINUED, or without a platform'),
    })
    .post('/api/games/:gameId/unpublish', ({ params }) => store.unpublish(params.gameId), {
      permission: 'games:write',
      params: GameParams,
      response: { 200: 'games.Game' },
      detail: tag('Move LIVE to MAINTENANCE; 409 otherwise'),
    })
    .post(
      '/api/games/:gameId/environments',
      async ({ params, body, set }) => {
        set.status = 201
        return withKeys(await store.createEnv(params.gameId, body))
      },
      {
        permission: 'environments:write',
        params: GameParams,
        transform: ({ body }) => rejectUnknown(EnvironmentCreate, body, 'body'),
        body: EnvironmentCreate,
        response: { 201: 'games.Environment' },
        detail: tag('Create an environment (409 when the name exists)', ['environments']),
      },
    )
    .get(
      '/api/games/:gameId/environments',
      async ({ params }) => allWithKeys(params.gameId, await store.listEnvs(params.gameId)),
      {
        permission: 'games:read',
        params: GameParams,
        response: { 200: t.Array(Environment) },
        detail: tag('List the environments of a game', ['environments']),
      },
    )
    .get(
      '/api/games/:gameId/environments/:environmentName',
      async ({ params }) => withKeys(await store.getEnv(params.gameId, params.environmentName)),
      {
        permission: 'games:read',
        params: EnvParams,
        response: { 200: 'games.Environment' },
        detail: tag('Read an environment with its settings', ['environments']),
      },
    )
    .put(
      '/api/games/:gameId/environments/:environmentName',
      async ({ params, body }) => {
        const current = await store.getEnv(params.gameId, params.environmentName)
        const patch = withoutEchoed(
          current,
          body,
          ['id', 'gameId', 'name', 'createdAt'],
          ['updatedAt', 'apiKeys'],
        )
        return withKeys(await store.updateEnv(params.gameId, params.environmentName, patch))
      },
      {
        permission: 'environments:write',
        params: EnvParams,
        transform: ({ body }) => rejectUnknown(EnvironmentUpdate, body, 'body'),
        body: EnvironmentUpdate,
        response: { 200: 'games.Environment' },
        detail: tag('Update an environment; settings are merged field by field', ['environments']),
      },
    )
    .delete(
      '/api/games/:gameId/environments/:environmentName',
      async ({ params, set }) => {
        await store.deleteEnv(params.gameId, params.environmentName)
        await auth.revokeApiKeysOf(params.gameId, params.environmentName)
        set.status = 204
      },
      {
        permission: 'environments:write',
        params: EnvParams,
        detail: tag('Delete an environment; its API keys are revoked and its experiments deleted', [
          'environments',
        ]),
      },
    )
    .get(
      '/api/games/:gameId/environments/:environmentName/settings',
      async ({ params }) => (await store.getEnv(params.gameId, params.environmentName)).settings,
      {
        permission: 'games:read',
        params: EnvParams,
        response: { 200: EnvironmentSettings },
        detail: tag(
          'Per-environment settings: sampling rate, rate-limit policy, PII policy, property allow-list, retention days',
          ['environments'],
        ),
      },
    )
    .put(
      '/api/games/:gameId/environments/:environmentName/settings',
      async ({ params, body }) =>
        (await store.updateEnv(params.gameId, params.environmentName, { settings: body })).settings,
      {
        permission: 'environments:write',
        params: EnvParams,
        transform: ({ body }) => rejectUnknown(SettingsPatch, body, 'body'),
        body: SettingsPatch,
        response: { 200: EnvironmentSettings },
        detail: tag('Update per-environment settings (fields not given stay as they are)', ['environments']),
      },
    )
    .post(
      '/api/api-keys',
      async ({ body, principal, set }) => {
        await store.getEnv(body.gameId, body.environment)
        const created = await auth.createApiKey({ ...body, createdBy: principal.id, actor: principal })
        // An environment deleted meanwhile revoked the keys it found, before this one was stored:
        // read again after the write, so a key never outlives its environment (it reached the next
        // environment made under that name; eighteenth session's audit).
        try {
          await store.getEnv(body.gameId, body.environment)
        } catch (e) {
          await auth.revokeApiKey(created.id)
          throw e
        }
        set.status = 201
        return created
      },
      {
        permission: 'apikeys:write',
        transform: ({ body }) => rejectUnknown(ApiKeyCreate, body, 'body'),
        body: ApiKeyCreate,
        response: { 201: ApiKeyCreated },
        detail: tag(
          'Create an API key bound to a game and environment; the key is shown only in this answer',
          ['api-keys'],
        ),
      },
    )
    .get(
      '/api/api-keys',
      async ({ query, set }) => {
        const { limit, ...filter } = query
        const keys = await auth.listApiKeys({ ...filter, limit: limit === undefined ? undefined : limit + 1 })
        if (limit !== undefined && keys.length > limit) {
          keys.length = limit
          set.headers['x-next-after'] = keys[limit - 1].id
        }
        return keys
      },
      {
        permission: 'apikeys:read',
        query: t.Composite([
          t.Object({ gameId: t.Optional(t.String()), environment: t.Optional(t.String()) }),
          KeyPage,
        ]),
        response: { 200: t.Array(ApiKey) },
        detail: tag('List API keys (never the keys themselves)', ['api-keys'], {
          description:
            'By id, the order they were made, revoked ones included. limit (1-1,000) and after page the list, which stays an array: ' +
            'the X-Next-After header (the last id) is present when more follow, send it as after; without limit, all of them.',
        }),
      },
    )
    .delete('/api/api-keys/:id', ({ params }) => auth.revokeApiKey(params.id), {
      permission: 'apikeys:write',
      response: { 200: 'games.ApiKey' },
      detail: tag('Revoke an API key; it stops working at once', ['api-keys']),
    })
}

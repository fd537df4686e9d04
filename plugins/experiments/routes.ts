import { Elysia, t } from 'elysia'
import { NotFound } from '../../core/http'
import type { PluginContext } from '../../core/plugin'
import { rejectUnknown, withoutEchoed } from '../../core/strict'
import { explain } from '../../sdk/assign'
import { experimentCounts } from './exposures'
import type { PublicConfig } from './public'
import {
  AssignQuery,
  Assignment,
  Experiment,
  ExperimentCreate,
  ExperimentPage,
  ExperimentUpdate,
  ListQuery,
  PublicExperiment,
  Results,
  UpdateQuery,
} from './schema'
import { analyze } from './stats'
import type { ExperimentsStore } from './store'

const tag = (summary: string, description?: string) => ({ tags: ['experiments'], summary, description })
const IdParams = t.Object({ id: t.String() })

const CONFIG_PATH = '/api/config/:gameId/:environment'

export function experimentsRoutes(
  ctx: PluginContext<unknown>,
  store: ExperimentsStore,
  publicConfig: PublicConfig,
  /** How long a results read waits for the exposures consumer (ms). */
  readWaitMs = 2000,
) {
  // Every game client polls this: served from Bun's native router too (see ctx.fastRoute).
  ctx.fastRoute('GET', CONFIG_PATH, (request, params) =>
    publicConfig.serve(params.gameId, params.environment, request.headers.get('if-none-match')),
  )
  return new Elysia({ name: 'experiments' })
    .use(ctx.guard)
    .model({
      'experiments.Experiment': Experiment,
      'experiments.Results': Results,
      'experiments.PublicExperiment': PublicExperiment,
    })
    .post(
      '/api/experiments',
      async ({ body, set }) => {
        set.status = 201
        return store.create(body)
      },
      {
        permission: 'experiments:write',
        transform: ({ body }) => rejectUnknown(ExperimentCreate, body, 'body'),
        body: ExperimentCreate,
        response: { 201: 'experiments.Experiment' },
        detail: tag(
          'Create an experiment (status draft)',
          'Variants need unique names and weights summing to 100 (a draft may have none yet). Unknown game or environment: 400. ' +
            'A name already used in the same game and environment: 409.',
        ),
      },
    )
    .get('/api/experiments', ({ query }) => store.list(query), {
      permission: 'experiments:read',
      query: ListQuery,
      response: { 200: ExperimentPage },
      detail: tag(
        'List experiments: filters gameId, environment, status; page object {items, total, page, size}',
      ),
    })
    .get('/api/experiments/:id', ({ params }) => store.get(params.id), {
      permission: 'experiments:read',
      params: IdParams,
      response: { 200: 'experiments.Experiment' },
      detail: tag('Read an experiment'),
    })
    .put(
      '/api/experiments/:id',
      async ({ params, body, query }) =>
        store.update(
          params.id,
          withoutEchoed(
            await store.get(params.id),
            body,
            ['id', 'status', 'createdAt'],
            ['updatedAt', 'publishedAt'],
          ),
          query.force === true,
        ),
      {
        permission: 'experiments:write',
        params: IdParams,
        query: UpdateQuery,
        transform: ({ body }) => rejectUnknown(ExperimentUpdate, body, 'body'),
        body: ExperimentUpdate,
        response: { 200: 'experiments.Experiment' },
        detail: tag(
          'Update name, description, salt or config',
          'gameId and environment are fixed (400 when changed). Changing the variants or the salt of a running or paused experiment ' +
            're-buckets users and answers 409 unless force=true. A running experiment must keep a runnable config (409).',
        ),
      },
    )
    .delete(
      '/api/experiments/:id',
      async ({ params, set }) => {
        await store.remove(params.id)
        set.status = 204
      },
      {
        permission: 'experiments:write',
        params: IdParams,
        detail: tag('Delete an experiment; a running one must be paused first (409)'),
      },
    )
    .post('/api/experiments/:id/publish', ({ params }) => store.publish(params.id), {
      permission: 'experiments:write',
      params: IdParams,
      response: { 200: 'experiments.Experiment' },
      detail: tag(
        'Start or resume: draft or paused -> running',
        'Refused with 409 and the reasons when already running or when the config cannot run (fewer than two variants, a weight of 0, ' +
          'the environment gone). The experiment appears in the public configuration at once.',
      ),
    })
    .post('/api/experiments/:id/pause', ({ params }) => store.pause(params.id), {
      permission: 'experiments:write',
      params: IdParams,
      response: { 200: 'experiments.Experiment' },
      detail: tag('Pause: running -> paused (409 from any other state); it leaves the public configuration'),
    })
    .get(
      '/api/experiments/:id/assign',
      async ({ params, query }) => {
        const e = await store.get(params.id)
        return {
          experimentId: e.id,
          userId: query.userId,
          status: e.status,
          ...explain(e, query.userId, { platform: query.platform, country: query.country }),
        }
      },
      {
        // Part of the SDK surface: the SDK key of the experiment's own game and environment too,
        // for what the public configuration shows (running experiments). The key ships in every
        // game client: a draft's or a paused experiment's variants are no one's outside the studio,
        // so for the key such an experiment does not exist (404, as for an unknown id).
        sdkOr: {
          permission: 'experiments:read',
          owner: async ({ id }: Record<string, string>) => {
            const e = await store.get(id)
            if (e.status !== 'running') throw new NotFound(`experiment '${id}' not found`)
            return { gameId: e.gameId, environment: e.environment }
          },
        },
        params: IdParams,
        query: AssignQuery,
        response: { 200: Assignment },
        detail: tag(
          'The variant a user gets, computed by the SDK function itself',
          'bucket = murmur3_x86_32(UTF-8 of id:salt:userId, seed 0) mod 100, then the accumulated-weight walk. Optional platform and ' +
            'country check the targeting. For support and debugging; works in every status for users with experiments:read. ' +
            "The SDK key (x-api-key) of the experiment's game and environment reaches running experiments only (a draft or paused one: 404; another game's key: 403).",
        ),
      },
    )
    .get(
      '/api/experiments/:id/results',
      async ({ params, set }) => {
        const e = await store.get(params.id)
        const metrics = [e.config.metrics?.primary, ...(e.config.metrics?.secondary ?? [])].filter(
          (m): m is string => !!m,
        )
        set.headers['x-as-of'] = new Date(await ctx.events.settle(readWaitMs)).toISOString()
        const counts = await experimentCounts(ctx.service('ingest').db, {
          gameId: e.gameId,
          environment: e.environment,
          experimentId: e.id,
          metrics: [...new Set(metrics)],
          configured: e.config.variants.map((v) => v.name),
        })
        const results = analyze(e, counts)
        // The SRM check runs here; a running experiment that fails it raises the platform event
        // (notify turns it into one notification per experiment and day).
        if (e.status === 'running' && results.srm.mismatch && results.srm.pValue !== null)
          void ctx.bus.emit('experiment_srm', {
            experiment_id: e.id,
            game_id: e.gameId,
            p_value: results.srm.pValue,
          })
        return results
      },
      {
        permission: 'experiments:read',
        params: IdParams,
        response: { 200: 'experiments.Results' },
        detail: tag(
          'Analysis: conversion per variant against the first, significance and SRM',
          'A user counts once, in the variant of their first experiment_exposure; a conversion is the metric event at or after that. ' +
            'Each variant against the first: relative uplift, absolute difference with its 95% interval, two-proportion z-test p-value, ' +
            'significant below 0.05. SRM: chi-square of exposures against the weights, flagged below p = 0.001.',
        ),
      },
    )
    .get(
      CONFIG_PATH,
      ({ params, request }) =>
        publicConfig.serve(params.gameId, params.environment, request.headers.get('if-none-match')),
      {
        detail: {
          tags: ['experiments'],
          summary: 'Public: the running experiments of an environment as [{id, salt, config}]',
          description:
            'No authentication. Carries an ETag and Cache-Control: no-cache; a matching If-None-Match answers 304 without a body. ' +
            'Changes are visible as soon as the write that made them answered. Unknown game or environment: 404.',
          security: [],
          responses: {
            200: {
              description: 'running experiments',
              content: {
                'application/json': {
                  schema: {
                    type: 'array',
                    items: { $ref: '#/components/schemas/experiments.PublicExperiment' },
                  },
                },
              },
            },
            304: { description: 'unchanged since the ETag sent' },
            404: { description: 'unknown game or environment' },
          },
        },
      },
    )
}

import type { TSchema } from '@sinclair/typebox'
import { t } from 'elysia'
import { PageNumber } from '../../core/schema'
import { ReadOnly } from '../../core/strict'

export const STATUSES = ['draft', 'running', 'paused'] as const
// A tuple, not STATUSES.map(): Elysia's response typing needs the literal members spelled out.
export const ExperimentStatus = t.Union([t.Literal('draft'), t.Literal('running'), t.Literal('paused')])
export type ExperimentStatus = (typeof STATUSES)[number]

/** Event names: what ingestion stores in `event`. */
const MetricName = t.String({
  minLength: 1,
  maxLength: 100,
  pattern: '^[^\\s]+$',
  description: 'an event name, for example purchase',
})

export const Variant = t.Object(
  {
    name: t.String({
      minLength: 1,
      maxLength: 64,
      pattern: '\\S',
      description: 'unique within the experiment',
    }),
    weight: t.Number({
      minimum: 0,
      maximum: 100,
      description: 'percentage of users; the weights sum to 100',
    }),
  },
  { additionalProperties: false },
)

export const ExperimentConfig = t.Object(
  {
    variants: t.Array(Variant, {
      maxItems: 26,
      description:
        'in order; the first is the control the others are compared with. A draft may have none; running needs two or more with positive weights',
    }),
    targeting: t.Optional(
      t.Object(
        {
          platform: t.Optional(
            t.Array(t.String({ pattern: '^[A-Za-z][A-Za-z0-9_]{0,31}$' }), {
              uniqueItems: true,
              maxItems: 20,
              description:
                'platforms shown the experiment (ANDROID, IOS, WEB); empty or absent: all. Stored upper case',
            }),
          ),
          countries: t.Optional(
            t.Array(t.String({ pattern: '^[A-Za-z]{2}$' }), {
              maxItems: 250,
              description: 'ISO 3166-1 alpha-2 codes; empty or absent: all. Stored upper case',
            }),
          ),
        },
        { additionalProperties: false },
      ),
    ),
    metrics: t.Optional(
      t.Object(
        {
          primary: t.Optional(MetricName),
          secondary: t.Optional(t.Array(MetricName, { uniqueItems: true, maxItems: 20 })),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
)
export type ExperimentConfig = typeof ExperimentConfig.static

export const Experiment = t.Object({
  id: t.String(),
  gameId: t.String(),
  environment: t.String(),
  name: t.String(),
  description: t.String(),
  status: ExperimentStatus,
  salt: t.String(),
  config: ExperimentConfig,
  createdAt: t.String({ description: 'ISO 8601 UTC' }),
  updatedAt: t.String({ description: 'ISO 8601 UTC' }),
  publishedAt: t.Optional(t.String({ description: 'ISO 8601 UTC; the last time it started running' })),
})
export type Experiment = typeof Experiment.static

// A unique key: 191 characters is what MySQL indexes in utf8mb4 (a longer name answered 500 there).
const Name = t.String({ minLength: 1, maxLength: 191, pattern: '\\S' })
const Salt = t.String({
  minLength: 1,
  maxLength: 128,
  pattern: '^[^\\s]+$',
  description: 'part of the hashed text; changing it re-buckets every user',
})

export const ExperimentCreate = t.Object(
  {
    gameId: t.String({ minLength: 1, maxLength: 100 }),
    environment: t.String({ minLength: 1, maxLength: 64 }),
    name: Name,
    description: t.Optional(t.String({ maxLength: 2000 })),
    salt: t.Optional(
      t.String({
        minLength: 1,
        maxLength: 128,
        pattern: '^[^\\s]+$',
        description: 'absent: a random one is generated',
      }),
    ),
    config: ExperimentConfig,
  },
  { additionalProperties: false },
)
export type ExperimentCreate = typeof ExperimentCreate.static

export const ExperimentUpdate = t.Object(
  {
    gameId: t.Optional(t.String({ description: 'fixed after create; accepted only when unchanged' })),
    environment: t.Optional(t.String({ description: 'fixed after create; accepted only when unchanged' })),
    name: t.Optional(Name),
    description: t.Optional(t.String({ maxLength: 2000 })),
    salt: t.Optional(Salt),
    config: t.Optional(ExperimentConfig),
    id: ReadOnly(),
    status: ReadOnly('read-only: changes through publish and pause; accepted when unchanged, else 400'),
    createdAt: ReadOnly(),
    updatedAt: ReadOnly('read-only: ignored, it changes with every write'),
    publishedAt: ReadOnly('read-only: ignored'),
  },
  { additionalProperties: false },
)
export type ExperimentUpdate = typeof ExperimentUpdate.static

export const UpdateQuery = t.Object({
  force: t.Optional(
    t.Boolean({
      description:
        'allow changing the variants or salt of a running or paused experiment, which re-buckets users',
    }),
  ),
})

export const ListQuery = t.Object({
  gameId: t.Optional(t.String()),
  environment: t.Optional(t.String()),
  status: t.Optional(ExperimentStatus),
  page: t.Optional(PageNumber(0, '0-based page; 0 when absent')),
  size: t.Optional(t.Integer({ minimum: 1, maximum: 100, description: 'page size; 20 when absent' })),
  sort: t.Optional(
    t.String({
      description: 'field[,asc|desc]; fields: name, status, createdAt, updatedAt (default createdAt,desc)',
    }),
  ),
})
export type ListQuery = typeof ListQuery.static

export const ExperimentPage = t.Object({
  items: t.Array(Experiment),
  total: t.Integer(),
  page: t.Integer(),
  size: t.Integer(),
})

/** One entry of the public configuration read. */
export const PublicExperiment = t.Object({ id: t.String(), salt: t.String(), config: ExperimentConfig })
export type PublicExperiment = typeof PublicExperiment.static

export const AssignQuery = t.Object({
  userId: t.String({ minLength: 1, maxLength: 256 }),
  platform: t.Optional(t.String({ maxLength: 32 })),
  country: t.Optional(t.String({ maxLength: 2 })),
})

export const Assignment = t.Object({
  experimentId: t.String(),
  userId: t.String(),
  status: ExperimentStatus,
  bucket: t.Integer({ minimum: 0, maximum: 99 }),
  variant: t.Union([t.String(), t.Null()]),
  eligible: t.Boolean(),
  reason: t.Optional(t.String()),
})

const Nullable = <T extends TSchema>(s: T) => t.Union([s, t.Null()])

export const Comparison = t.Object({
  uplift: Nullable(
    t.Number({
      description: 'relative: (rate - controlRate) / controlRate; null when the control rate is 0',
    }),
  ),
  difference: t.Number({ description: 'absolute: rate - controlRate' }),
  ci95: t.Object(
    { lower: t.Number(), upper: t.Number() },
    { description: '95% confidence interval of the absolute difference (unpooled)' },
  ),
  upliftCi95: Nullable(
    t.Object({ lower: t.Number(), upper: t.Number() }, { description: 'ci95 divided by the control rate' }),
  ),
  zScore: t.Number(),
  pValue: t.Number({ description: 'two-sided, two-proportion z-test with pooled variance' }),
  significant: t.Boolean({ description: 'pValue < 0.05' }),
})

export const MetricResult = t.Object({
  metric: t.String(),
  variants: t.Array(
    t.Object({
      name: t.String(),
      exposures: t.Integer(),
      conversions: t.Integer({
        description: 'exposed users who sent the metric event at or after their first exposure',
      }),
      conversionRate: t.Number(),
      vsControl: Nullable(Comparison),
    }),
  ),
})

export const Results = t.Object({
  experimentId: t.String(),
  status: ExperimentStatus,
  control: Nullable(t.String()),
  totalExposures: t.Integer(),
  exposures: t.Array(
    t.Object({ name: t.String(), weight: t.Number(), exposures: t.Integer(), share: t.Number() }),
  ),
  primary: Nullable(MetricResult),
  secondary: t.Array(MetricResult),
  srm: t.Object({
    chiSquare: Nullable(t.Number()),
    degreesOfFreedom: t.Integer(),
    pValue: Nullable(
      t.Number({ description: 'chi-square goodness of fit of exposures against the weights' }),
    ),
    mismatch: t.Boolean({ description: 'pValue < 0.001' }),
  }),
  unexpectedVariants: t.Array(
    t.Object({
      name: t.String(),
      exposures: t.Integer(),
      others: t.Optional(
        t.Integer({
          description: 'present on the last line only, which counts this many names beyond the 20 listed',
        }),
      ),
    }),
    {
      description:
        'exposures naming no configured variant: the 20 names with the most, then, when there are more, one line counting the rest (`others`)',
    },
  ),
})
export type Results = typeof Results.static

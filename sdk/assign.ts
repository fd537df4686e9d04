/**
 * Client-side experiment assignment (spec 1 "Experiment", assignment rule):
 *
 *   bucket = murmur3_x86_32(UTF-8 of `${id}:${salt}:${userId}`, seed 0) mod 100
 *
 * then walk the variants in order accumulating weight; the first variant whose accumulated
 * weight exceeds the bucket wins; if none does, the first variant. The server's
 * `GET /api/experiments/{id}/assign` calls this very function, so support sees what a client sees.
 *
 * The experiment shapes below are structural on purpose: the SDK runs in game clients without
 * the server's schema library. The server passes its schema-typed experiments in, so the
 * compiler checks that both stay compatible.
 */
import { murmur3Key } from './murmur3'

export interface AssignableVariant {
  name: string
  weight: number
}

/** What `GET /api/config/{gameId}/{environment}` serves per running experiment. */
export interface AssignableExperiment {
  id: string
  salt: string
  config: {
    variants: readonly AssignableVariant[]
    targeting?: { platform?: readonly string[]; countries?: readonly string[] }
  }
}

/** The user attributes targeting looks at; compared case-insensitively. */
export interface Attributes {
  platform?: string
  country?: string
}

export interface Explanation {
  bucket: number
  /** The variant the user gets; null when targeting excludes the user or there are no variants. */
  variant: string | null
  eligible: boolean
  /** Why the user is not eligible. */
  reason?: string
}

/** The user's bucket, 0..99. */
export function bucketOf(id: string, salt: string, userId: string): number {
  return murmur3Key(id, salt, userId) % 100
}

/** The variant for a bucket by the accumulated-weight walk; null only without variants. */
export function variantFor(variants: readonly AssignableVariant[], bucket: number): string | null {
  if (variants.length === 0) return null
  let acc = 0
  for (let i = 0; i < variants.length; i++) {
    acc += variants[i].weight
    if (bucket < acc) return variants[i].name
  }
  return variants[0].name
}

function listed(list: readonly string[] | undefined, value: string | undefined): boolean {
  if (!list || list.length === 0) return true
  if (!value) return false
  const v = value.toUpperCase()
  for (let i = 0; i < list.length; i++) if (list[i].toUpperCase() === v) return true
  return false
}

/**
 * Why targeting excludes the user, or undefined when it does not. An empty or absent list
 * targets everyone; a non-empty list needs the attribute, since an unknown platform or country
 * cannot be shown to match.
 */
export function exclusion(experiment: AssignableExperiment, attributes: Attributes = {}): string | undefined {
  const t = experiment.config.targeting
  if (!t) return undefined
  if (!listed(t.platform, attributes.platform))
    return attributes.platform
      ? `platform '${attributes.platform}' is not targeted`
      : 'platform unknown but the experiment targets platforms'
  if (!listed(t.countries, attributes.country))
    return attributes.country
      ? `country '${attributes.country}' is not targeted`
      : 'country unknown but the experiment targets countries'
  return undefined
}

/** The variant name for the user, or null when targeting excludes the user. */
export function assign(
  experiment: AssignableExperiment,
  userId: string,
  attributes?: Attributes,
): string | null {
  if (attributes !== undefined || experiment.config.targeting) {
    if (exclusion(experiment, attributes) !== undefined) return null
  }
  return variantFor(experiment.config.variants, bucketOf(experiment.id, experiment.salt, userId))
}

/** The whole decision, for support and debugging. */
export function explain(
  experiment: AssignableExperiment,
  userId: string,
  attributes?: Attributes,
): Explanation {
  const bucket = bucketOf(experiment.id, experiment.salt, userId)
  const reason = exclusion(experiment, attributes)
  if (reason !== undefined) return { bucket, variant: null, eligible: false, reason }
  const variant = variantFor(experiment.config.variants, bucket)
  return variant === null
    ? { bucket, variant, eligible: false, reason: 'the experiment has no variants' }
    : { bucket, variant, eligible: true }
}

/** The `experiment_exposure` event of spec 1 section 6, in the ingestion event shape. */
export interface ExposureEvent {
  event: 'experiment_exposure'
  /** Epoch milliseconds as a string (ingestion rejects numbers). */
  ts: string
  uid: string
  game_id: string
  env: string
  attrs: { exp: string; variant: string }
}

export interface ExperimentsOptions {
  gameId: string
  environment: string
  /**
   * Receives exposure events. With the batching client of `sdk/client.ts` (identified as the
   * same user): `track: (e) => client.track(e.event, e.attrs, Number(e.ts))`.
   */
  track: (event: ExposureEvent) => void
  /** Exposures remembered for de-duplication; the oldest are forgotten beyond this. */
  maxRemembered?: number
  now?: () => number
}

/**
 * Assigns and reports each exposure once per user and experiment, so analysis counts users,
 * not screens. A user whose variant changes (a forced re-bucketing) is reported again.
 */
export class Experiments {
  private seen = new Map<string, string>()
  private readonly max: number

  constructor(private readonly opts: ExperimentsOptions) {
    this.max = opts.maxRemembered ?? 10_000
  }

  assign(experiment: AssignableExperiment, userId: string, attributes?: Attributes): string | null {
    const variant = assign(experiment, userId, attributes)
    if (variant === null) return null
    const key = `${experiment.id}\n${userId}`
    if (this.seen.get(key) === variant) return variant
    this.seen.delete(key)
    this.seen.set(key, variant)
    if (this.seen.size > this.max) this.seen.delete(this.seen.keys().next().value as string)
    this.opts.track({
      event: 'experiment_exposure',
      ts: String((this.opts.now ?? Date.now)()),
      uid: userId,
      game_id: this.opts.gameId,
      env: this.opts.environment,
      attrs: { exp: experiment.id, variant },
    })
    return variant
  }
}

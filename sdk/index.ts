/**
 * The liveops client SDK: a batching, signing, retrying event client and experiment assignment
 * with exposure reporting. No server imports; runs in browsers and Bun.
 */
export {
  type Attrs,
  ClientError,
  type ClientOptions,
  LiveopsClient,
  MAX_BACKOFF_MS,
  retryDelay,
} from './client'
export {
  type AssignableExperiment,
  type AssignableVariant,
  type Attributes,
  assign,
  bucketOf,
  Experiments,
  type ExperimentsOptions,
  explain,
  type ExposureEvent,
  exclusion,
  variantFor,
} from './assign'
export {
  EVENTS,
  GameEvents,
  type LevelAt,
  PERF_METRICS,
  type PerfMetric,
  type Platform,
  type Tracker,
} from './events'
export { murmur3, murmur3Bytes } from './murmur3'
export { bodyDigest, newNonce, signRequest, type SignatureHeaders } from './sign'
export { uuidv7 } from './uuid'

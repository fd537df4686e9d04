/**
 * Entry of a training thread (see jobs.ts): one job per thread, so the event loop keeps
 * answering requests while a model trains, and cancelling is `terminate()`.
 */
import { type ModelType, train } from './algorithms'

declare const self: Worker

export type TrainRequest = {
  type: ModelType
  algorithm: string
  hyperparameters: Record<string, number>
  classes?: [string, string]
  x: Float64Array
  y: Float64Array
  n: number
  d: number
  features: string[]
}

export type TrainReply =
  | { kind: 'progress'; share: number }
  | { kind: 'done'; artifact: unknown; metrics: Record<string, number> }
  | { kind: 'error'; message: string }

self.onmessage = (m: MessageEvent<TrainRequest>) => {
  const r = m.data
  let last = 0
  try {
    const out = train(
      {
        type: r.type,
        algorithm: r.algorithm,
        hyperparameters: r.hyperparameters,
        classes: r.classes,
        data: { x: r.x, y: r.y, n: r.n, d: r.d, features: r.features },
      },
      (share) => {
        const now = Date.now()
        if (now - last < 100) return
        last = now
        self.postMessage({ kind: 'progress', share } satisfies TrainReply)
      },
    )
    self.postMessage({ kind: 'done', artifact: out.artifact, metrics: out.metrics } satisfies TrainReply)
  } catch (e) {
    self.postMessage({ kind: 'error', message: String((e as Error)?.message ?? e) } satisfies TrainReply)
  }
}

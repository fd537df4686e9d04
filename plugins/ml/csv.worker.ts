/**
 * Entry of a CSV reading thread (see csv-thread.ts): an uploaded dataset is parsed here, so a
 * large upload never holds the event loop (issue 34 point 7: 9.8 MB stalled /healthz for 10 s).
 */
import type { ModelType } from './algorithms'
import { fromCsv, scanCsvText } from './csv-data'
import type { Built } from './rows'
import type { DatasetConfig } from './schema'

declare const self: Worker

/** An upload's header and row count (counted up to one past `maxRows`). */
export type CsvScan = { kind: 'scan'; content: string; maxRows: number }
export type CsvScanReply = { ok: true; columns: string[]; rows: number } | { ok: false; error: string }
/** A training's rows from a stored dataset, built here too (`fromCsv`): 10 MB held the loop 0.5-3.6 s. */
export type CsvBuild = {
  kind: 'build'
  type: ModelType
  cfg: DatasetConfig
  content: string
  maxRows: number
}
export type CsvBuildReply = { ok: true; built: Built } | { ok: false; error: string }

self.onmessage = (m: MessageEvent<CsvScan | CsvBuild>) => {
  const r = m.data
  try {
    if (r.kind === 'build')
      self.postMessage({
        ok: true,
        built: fromCsv(r.type, r.cfg, r.content, r.maxRows),
      } satisfies CsvBuildReply)
    else self.postMessage({ ok: true, ...scanCsvText(r.content, r.maxRows) } satisfies CsvScanReply)
  } catch (e) {
    self.postMessage({ ok: false, error: String((e as Error)?.message ?? e) } satisfies CsvBuildReply)
  }
}

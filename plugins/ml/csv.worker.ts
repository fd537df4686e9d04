/**
 * Entry of a CSV reading thread (see csv-thread.ts): an uploaded dataset is parsed here, so a
 * large upload never holds the event loop (issue 34 point 7: 9.8 MB stalled /healthz for 10 s).
 */
import { parse } from 'csv-parse/sync'
import type { ModelType } from './algorithms'
import { type Built, fromCsv } from './dataset'
import type { DatasetConfig } from './schema'

declare const self: Worker

export type CsvScanReply = { ok: true; columns: string[]; rows: number } | { ok: false; error: string }
/** A training's rows from a stored dataset, built here too (`fromCsv`): 10 MB held the loop 0.5-3.6 s. */
export type CsvBuild = { kind: 'build'; type: ModelType; cfg: DatasetConfig; content: string }
export type CsvBuildReply = { ok: true; built: Built } | { ok: false; error: string }

self.onmessage = (m: MessageEvent<string | CsvBuild>) => {
  if (typeof m.data !== 'string') {
    try {
      self.postMessage({
        ok: true,
        built: fromCsv(m.data.type, m.data.cfg, m.data.content),
      } satisfies CsvBuildReply)
    } catch (e) {
      self.postMessage({ ok: false, error: String((e as Error)?.message ?? e) } satisfies CsvBuildReply)
    }
    return
  }
  try {
    const records = parse(m.data, { skip_empty_lines: true, trim: true }) as string[][]
    self.postMessage({
      ok: true,
      columns: records[0] ?? [],
      rows: Math.max(0, records.length - 1),
    } satisfies CsvScanReply)
  } catch (e) {
    self.postMessage({ ok: false, error: String((e as Error)?.message ?? e) } satisfies CsvScanReply)
  }
}

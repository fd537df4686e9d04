/**
 * Entry of a CSV reading thread (see csv-thread.ts): an uploaded dataset is parsed here, so a
 * large upload never holds the event loop (issue 34 point 7: 9.8 MB stalled /healthz for 10 s).
 */
import { parse } from 'csv-parse/sync'

declare const self: Worker

export type CsvScanReply = { ok: true; columns: string[]; rows: number } | { ok: false; error: string }

self.onmessage = (m: MessageEvent<string>) => {
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

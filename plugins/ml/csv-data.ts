import { parse } from 'csv-parse/sync'
import type { ModelType } from './algorithms'
import { type Built, RowBuilder } from './rows'
import type { DatasetConfig } from './schema'

/*
 * Uploaded CSV sets, read record by record (csv-parse's on_record, which keeps nothing when it
 * returns null): the upload's scan counts the rows, a training's build fills the numeric set
 * straight from each record. Both run on a CSV thread (csv.worker.ts). Neither holds an object
 * per row: a 10 MB upload of 5M one-cell rows took the server past 1.3 GB as row objects.
 */

const OPTIONS = { skip_empty_lines: true, trim: true } as const

/**
 * The header and the row count of a CSV text. Counting stops past `maxRows` rows: `rows` is then
 * `maxRows + 1`, the set is refused anyway.
 */
export function scanCsvText(content: string, maxRows: number): { columns: string[]; rows: number } {
  let columns: string[] | undefined
  let rows = 0
  parse(content, {
    ...OPTIONS,
    // The header and one row past the limit, at most.
    to: maxRows + 2,
    on_record: (r: string[]) => {
      if (columns === undefined) columns = r
      else rows++
      return null
    },
  })
  return { columns: columns ?? [], rows }
}

/**
 * A training's numeric set from a dataset's CSV text: its first `maxRows` rows (a set uploaded
 * before uploads were held to max_rows may have more); a row lacking a number for a feature or
 * the label is skipped and counted.
 */
export function fromCsv(type: ModelType, cfg: DatasetConfig, content: string, maxRows: number): Built {
  // A time series: one value a row, from the label column (else the first feature).
  const series = type === 'TIME_SERIES'
  const features = series ? [] : cfg.features
  const label = series ? (cfg.label ?? cfg.features[0]) : cfg.label
  const binary = label !== undefined && (type === 'CLASSIFICATION' || type === 'ANOMALY_DETECTION')
  const rows = new RowBuilder(
    features,
    label === undefined ? { kind: 'none' } : binary ? { kind: 'binary' } : { kind: 'number' },
  )
  let at: number[] | undefined
  let labelAt = -1
  parse(content, {
    ...OPTIONS,
    // The header and max_rows rows.
    to: maxRows + 1,
    on_record: (r: string[]) => {
      if (at === undefined) {
        at = features.map((f) => r.indexOf(f))
        if (label !== undefined) labelAt = r.indexOf(label)
      } else rows.add((j) => r[at![j]], r[labelAt])
      return null
    },
  })
  return rows.done()
}

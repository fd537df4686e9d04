import type { Dataset } from './algorithms/data'

/*
 * A training set built row by row, the way both sources read it (an event page, a CSV record):
 * each value is turned into a number straight into its place, and a row that is not usable is
 * counted, never kept. plugins/ml/dataset.ts (events) and csv-data.ts (uploads) fill one.
 */

/**
 * A number from a JSON value or CSV cell: finite numbers, numeric strings, booleans (0/1); else
 * NaN. "Infinity", "1e400" and the like are not numbers here: one such value, sent with the
 * public SDK key, made every fit of its set NaN.
 */
export function toNumber(v: unknown): number {
  if (typeof v === 'number') return Number.isFinite(v) ? v : Number.NaN
  if (typeof v === 'boolean') return v ? 1 : 0
  if (typeof v === 'string' && v.trim() !== '') {
    if (v === 'true') return 1
    if (v === 'false') return 0
    const n = Number(v)
    return Number.isFinite(n) ? n : Number.NaN
  }
  return Number.NaN
}

export interface Built {
  data: Dataset
  classes?: [string, string]
  rowsUsed: number
  rowsSkipped: number
}

/** Two label values as classes 0 and 1: numeric order when both are numbers, false before true, else text order. */
function classesOf(values: string[]): [string, string] {
  if (values.length !== 2)
    throw new Error(
      `binary classification needs exactly two label values, found ${values.length}: ${values.join(', ')}`,
    )
  const [a, b] = values
  const na = toNumber(a)
  const nb = toNumber(b)
  if (!Number.isNaN(na) && !Number.isNaN(nb)) return na <= nb ? [a, b] : [b, a]
  return a <= b ? [a, b] : [b, a]
}

/**
 * How a row's label is read: not at all (or set later, as computed labels are), as a number, or
 * as one of two classes (`fixed` when they are known beforehand).
 */
export type LabelMode = { kind: 'none' } | { kind: 'number' } | { kind: 'binary'; fixed?: [string, string] }

/** Rows appended one at a time into doubling Float64Arrays. */
export class RowBuilder {
  x: Float64Array
  y: Float64Array
  n = 0
  skipped = 0
  private readonly d: number
  /** Binary labels without fixed classes: each value seen and its code (0 or 1), in order seen. */
  private codes = new Map<string, number>()

  constructor(
    readonly features: string[],
    private label: LabelMode,
  ) {
    this.d = features.length
    this.x = new Float64Array(1024 * this.d)
    this.y = new Float64Array(1024)
  }

  /** The label's number: NaN when the row has none usable. */
  private labelOf(v: unknown): number {
    const l = this.label
    if (l.kind === 'none') return 0
    if (l.kind === 'number') return toNumber(v)
    if (v === undefined || v === null || v === '') return Number.NaN
    const s = String(v)
    if (l.fixed) return s === l.fixed[1] ? 1 : s === l.fixed[0] ? 0 : Number.NaN
    let code = this.codes.get(s)
    if (code === undefined) {
      // A third value: the set cannot be binary, whatever the other rows hold.
      if (this.codes.size === 2)
        throw new Error(
          `binary classification needs exactly two label values, found more: ${[...this.codes.keys(), s].join(', ')}`,
        )
      code = this.codes.size
      this.codes.set(s, code)
    }
    return code
  }

  /**
   * One row: `value(j)` is feature j's raw value. Kept when every value and the label are
   * numbers (false otherwise, and counted as skipped).
   */
  add(value: (j: number) => unknown, label: unknown): boolean {
    const y = this.labelOf(label)
    if (Number.isNaN(y)) {
      this.skipped++
      return false
    }
    if (this.n === this.y.length) {
      const x = new Float64Array(this.x.length * 2)
      x.set(this.x)
      this.x = x
      const yy = new Float64Array(this.y.length * 2)
      yy.set(this.y)
      this.y = yy
    }
    const o = this.n * this.d
    for (let j = 0; j < this.d; j++) {
      const v = toNumber(value(j))
      if (Number.isNaN(v)) {
        this.skipped++
        return false
      }
      this.x[o + j] = v
    }
    this.y[this.n++] = y
    return true
  }

  /** The numeric set; `classes` names what the labels set later (computed 0/1) stand for. */
  done(classes?: [string, string]): Built {
    const l = this.label
    let cls = classes
    if (l.kind === 'binary') {
      cls = l.fixed
      if (!cls) {
        const seen = [...this.codes.keys()]
        cls = classesOf(seen)
        // Codes follow the order seen; the classes, their own order.
        if (cls[0] !== seen[0]) for (let i = 0; i < this.n; i++) this.y[i] = 1 - this.y[i]
      }
    }
    return {
      data: {
        x: this.x.slice(0, this.n * this.d),
        y: this.y.slice(0, this.n),
        n: this.n,
        d: this.d,
        features: this.features,
      },
      classes: cls,
      rowsUsed: this.n,
      rowsSkipped: this.skipped,
    }
  }
}

const nf = new Intl.NumberFormat('en', { maximumFractionDigits: 2 })
const nf0 = new Intl.NumberFormat('en', { maximumFractionDigits: 0 })

export const num = (v: number | null | undefined, digits?: number): string =>
  v === null || v === undefined || Number.isNaN(v)
    ? '–'
    : digits === 0
      ? nf0.format(v)
      : digits === undefined
        ? nf.format(v)
        : v.toFixed(digits)

/** A share 0..1 as a percentage. */
export const pct = (v: number | null | undefined, digits = 1): string =>
  v === null || v === undefined || Number.isNaN(v) ? '–' : `${(v * 100).toFixed(digits)}%`

export const money = (v: number | null | undefined, currency = 'USD'): string => {
  if (v === null || v === undefined || Number.isNaN(v)) return '–'
  try {
    return new Intl.NumberFormat('en', { style: 'currency', currency }).format(v)
  } catch {
    return `${nf.format(v)} ${currency}`
  }
}

/** A date-time as the reader's local time, to the minute. */
export const when = (v: string | number | null | undefined): string => {
  if (v === null || v === undefined || v === '') return '–'
  const d = new Date(v)
  if (Number.isNaN(d.getTime())) return String(v)
  return d.toLocaleString('en-GB', { dateStyle: 'medium', timeStyle: 'short' })
}

export const ms = (v: number | null | undefined): string => {
  if (v === null || v === undefined) return '–'
  if (v < 1000) return `${Math.round(v)} ms`
  if (v < 60_000) return `${(v / 1000).toFixed(1)} s`
  if (v < 3_600_000) return `${(v / 60_000).toFixed(1)} min`
  return `${(v / 3_600_000).toFixed(1)} h`
}

export const seconds = (v: number | null | undefined): string =>
  v === null || v === undefined ? '–' : ms(v * 1000)

/** `YYYY-MM-DD` of a day `offset` days from today (UTC). */
export const isoDay = (offset = 0): string =>
  new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10)

/** The change from `previous` to `value` as a signed percentage, or none when there was nothing before. */
export const change = (value: number, previous: number): number | undefined =>
  previous ? (value - previous) / Math.abs(previous) : undefined

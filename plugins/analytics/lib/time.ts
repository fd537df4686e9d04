export const DAY = 86_400_000
export const HOUR = 3_600_000
export const MINUTE = 60_000
export const floorTo = (ms: number, unit: number) => Math.floor(ms / unit) * unit

/** Log-scale duration histogram: bucket = round(ln(1 + ms) / ln 1.05), so a p95 read back is within about 5%. */
export const histBucket = (ms: number) => Math.round(Math.log1p(Math.max(0, ms)) / Math.log(1.05))
export const histValue = (bucket: number) => Math.expm1(bucket * Math.log(1.05))

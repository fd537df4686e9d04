import { appendFileSync, existsSync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs'
import { dirname } from 'node:path'
import { PRIVATE_DIR, PRIVATE_FILE } from './files'
import { maskValue } from './secrets'

export type Level = 'debug' | 'info' | 'warn' | 'error'
const RANK: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 }

/** Spec 3 "Health and metrics": the server log record's well-known fields. */
export interface LogFields {
  game_id?: string
  env?: string
  function_id?: string
  user_id?: string
  duration_ms?: number
  [key: string]: unknown
}

export interface Logger {
  debug(msg: string, fields?: LogFields): void
  info(msg: string, fields?: LogFields): void
  warn(msg: string, fields?: LogFields): void
  error(msg: string, fields?: LogFields): void
  child(component: string): Logger
}

export interface LogSettings {
  level: Level
  format: 'console' | 'json'
  file?: string
  max_size: number
  max_backups: number
  max_age: number
  sensitive_fields: string[]
}

/**
 * Masks fields named in `log.sensitive_fields` at any depth: 'set' plus the last 4 characters, or
 * as `mask` says (`setOnly` where every role reads the result).
 */
export function maskNamed(
  value: unknown,
  sensitive: ReadonlySet<string>,
  mask: (v: unknown) => string = maskValue,
): unknown {
  if (Array.isArray(value)) return value.map((v) => maskNamed(v, sensitive, mask))
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(value)) {
      out[k] = sensitive.has(k.toLowerCase()) ? mask(v) : maskNamed(v, sensitive, mask)
    }
    return out
  }
  return value
}

/** 'set' for any value there is, nothing of it shown (a field masked by its name alone). */
export const setOnly = (v: unknown): string => (v === undefined || v === null || v === '' ? '' : 'set')

export function createLogger(
  settings: LogSettings,
  write: (line: string) => void = defaultWriter(settings),
): Logger {
  const min = RANK[settings.level]
  const sensitive = new Set(settings.sensitive_fields.map((f) => f.toLowerCase()))
  const make = (component: string): Logger => {
    const emit = (level: Level, msg: string, fields?: LogFields) => {
      if (RANK[level] < min) return
      const masked = fields ? (maskNamed(fields, sensitive) as LogFields) : undefined
      const timestamp = new Date().toISOString()
      if (settings.format === 'json') write(JSON.stringify({ timestamp, level, component, msg, ...masked }))
      else
        write(
          `${timestamp} ${level.toUpperCase().padEnd(5)} [${component}] ${msg}${masked ? ` ${JSON.stringify(masked)}` : ''}`,
        )
    }
    return {
      debug: (m, f) => emit('debug', m, f),
      info: (m, f) => emit('info', m, f),
      warn: (m, f) => emit('warn', m, f),
      error: (m, f) => emit('error', m, f),
      child: (c) => make(c),
    }
  }
  return make('liveops')
}

/**
 * stdout, or an appended file rotated when it passes max_size MB: the current file becomes
 * `.1`, older ones shift up to max_backups, and rotated files older than max_age days are removed.
 */
function defaultWriter(s: LogSettings): (line: string) => void {
  if (!s.file) return (line) => process.stdout.write(`${line}\n`)
  const file = s.file
  mkdirSync(dirname(file), { recursive: true, mode: PRIVATE_DIR })
  let size = existsSync(file) ? statSync(file).size : 0
  const rotate = () => {
    const cutoff = Date.now() - s.max_age * 86_400_000
    for (let i = s.max_backups; i >= 1; i--) {
      const from = `${file}.${i}`
      if (!existsSync(from)) continue
      if (i === s.max_backups || (s.max_age > 0 && statSync(from).mtimeMs < cutoff))
        rmSync(from, { force: true })
      else renameSync(from, `${file}.${i + 1}`)
    }
    if (s.max_backups > 0) renameSync(file, `${file}.1`)
    else rmSync(file, { force: true })
    size = 0
  }
  return (line) => {
    if (size > s.max_size * 1024 * 1024) rotate()
    appendFileSync(file, `${line}\n`, { mode: PRIVATE_FILE })
    size += Buffer.byteLength(line) + 1
  }
}

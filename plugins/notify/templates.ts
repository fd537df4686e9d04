import { type Db, fromJson, iso, newId } from '../../core/db'
import { Generation } from '../../core/generation'
import { Conflict, NotFound, invalidField } from '../../core/http'
import { MAX_BODY, MAX_TITLE, type TemplateBody, checkParamsSize } from './schema'

export interface Template {
  id: string
  name: string
  title: string
  body: string
  level: string
  fields: { label: string; value: string }[]
  sample_params: Record<string, unknown>
  created_at: string
  updated_at: string
}

export interface Rendered {
  title: string
  body: string
  level: string
  fields: { label: string; value: string }[]
}

type Row = {
  id: string
  name: string
  title: string
  body: string
  level: string
  fields: string
  sample_params: string
  created_at: number
  updated_at: number
}
const COLS = 'id, name, title, body, level, fields, sample_params, created_at, updated_at'
const toTemplate = (r: Row): Template => ({
  id: r.id,
  name: r.name,
  title: r.title,
  body: r.body,
  level: r.level,
  fields: fromJson(r.fields, []),
  sample_params: fromJson(r.sample_params, {}),
  created_at: iso(r.created_at)!,
  updated_at: iso(r.updated_at)!,
})

const PLACEHOLDER = /\{\{\s*\.([A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)*)\s*\}\}/g

function lookup(vars: Record<string, unknown>, path: string): string {
  let v: unknown = vars
  for (const part of path.split('.')) {
    // Own properties only, at every step: what every object inherits (`{{.constructor}}`,
    // `{{.__proto__}}`, `{{.a.toString}}`) is not the caller's data and renders as a missing name.
    if (!v || typeof v !== 'object' || !Object.hasOwn(v, part)) return ''
    v = (v as Record<string, unknown>)[part]
  }
  if (v === undefined || v === null) return ''
  return typeof v === 'object' ? JSON.stringify(v) : String(v)
}

/** A rendering would pass `max` characters: the 400 names what made it so. */
const tooLong = (what: string, max: number) =>
  invalidField(
    'body.params',
    `the template's ${what} would be longer than ${max.toLocaleString('en-US')} characters with these params and data`,
  )

/**
 * `{{.name}}` (and `{{.a.b}}`) placeholders, Go-template style; an unknown or inherited name
 * renders empty. Past `max` characters it stops at once (400 naming `what`): the text rendered so
 * far is final, so each placeholder is checked as it is filled.
 */
export function renderText(
  text: string,
  vars: Record<string, unknown>,
  max = Number.POSITIVE_INFINITY,
  what = 'text',
): string {
  let grown = 0
  return text.replace(PLACEHOLDER, (m: string, path: string, offset: number) => {
    const v = lookup(vars, path)
    if (offset + grown + v.length > max) throw tooLong(what, max)
    grown += v.length - m.length
    return v
  })
}

/**
 * Renders a template with data merged under params (params win on equal names), held to what a
 * notification may hold (`MAX_TITLE`, `MAX_BODY` with its field lines): 400 past them.
 */
export function render(
  tpl: Pick<Template, 'title' | 'body' | 'level' | 'fields'>,
  params: Record<string, unknown>,
  data: Record<string, unknown> = {},
): Rendered {
  const vars = { ...data, ...params }
  // The rendered parts of the body together (their separators are counted at the end).
  let left = MAX_BODY
  const part = (text: string) => {
    const out = renderText(text, vars, left, 'body')
    left -= out.length
    return out
  }
  const head = part(tpl.body)
  const fields = tpl.fields.map((f) => ({ label: part(f.label), value: part(f.value) }))
  const body = [head, ...fields.map((f) => `${f.label}: ${f.value}`)].filter((s) => s !== '').join('\n')
  if (body.length > MAX_BODY) throw tooLong('body', MAX_BODY)
  return { title: renderText(tpl.title, vars, MAX_TITLE, 'title'), body, level: tpl.level, fields }
}

/**
 * Templates are few and read on every templated notify, so reads come from a copy of them all,
 * kept in step with this instance's writes. Another instance's write makes the next read load
 * them again (its change notice, or the periodic `forget` should the notice be lost), and a load
 * under way when this instance wrote is read again: what it read may be older than the write (on
 * PostgreSQL the read waits on the network while the writing request runs).
 */
export function templateStore(db: Db, publish: (id: string) => void = () => undefined) {
  let cache: Map<string, Template> | undefined
  let loading: Promise<Map<string, Template>> | undefined
  /** Every change of the templates made here or heard of. */
  const changes = new Generation()

  const readAll = async (): Promise<Map<string, Template>> => {
    try {
      const { value, settled } = await changes.settled(async () => {
        const rows = await db.all<Row>(`SELECT ${COLS} FROM notify_templates`)
        return new Map(rows.map((r) => [r.id, toTemplate(r)]))
      })
      if (settled) cache = value
      return value
    } finally {
      loading = undefined
    }
  }
  const load = (): Promise<Map<string, Template>> => {
    if (cache) return Promise.resolve(cache)
    loading ??= readAll()
    return loading
  }
  /** A write of this instance committed: the copy follows, other instances hear of it. */
  const wrote = (id: string, tpl?: Template) => {
    changes.bump()
    if (tpl) cache?.set(id, tpl)
    else cache?.delete(id)
    publish(id)
  }

  const values = (b: TemplateBody) => {
    // Kept in every instance's copy and in every list: bounded as a notification's params are.
    checkParamsSize({ sample_params: b.sample_params })
    return [
      b.name,
      b.title,
      b.body ?? '',
      b.level ?? 'info',
      JSON.stringify(b.fields ?? []),
      JSON.stringify(b.sample_params ?? {}),
    ]
  }

  return {
    /** Another instance changed the templates (or may have): the next read loads them again. */
    forget() {
      changes.bump()
      cache = undefined
    },
    async list(): Promise<Template[]> {
      return [...(await load()).values()].sort(
        (a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id),
      )
    },
    async find(id: string): Promise<Template | undefined> {
      return (await load()).get(id)
    },
    async get(id: string): Promise<Template> {
      const tpl = await this.find(id)
      if (!tpl) throw new NotFound(`template '${id}' not found`)
      return tpl
    },
    async create(b: TemplateBody): Promise<Template> {
      const now = Date.now()
      const id = b.id ?? newId()
      const row = await db.get<Row>(
        `INSERT INTO notify_templates (${COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING ${COLS}`,
        [id, ...values(b), now, now],
      )
      if (!row) throw new Conflict(`template '${id}' exists`)
      const tpl = toTemplate(row)
      wrote(id, tpl)
      return tpl
    },
    /** Whole replacement; the id in the URL wins over one in the body. */
    async update(id: string, b: TemplateBody): Promise<Template> {
      const row = await db.get<Row>(
        `UPDATE notify_templates SET name = ?, title = ?, body = ?, level = ?, fields = ?, sample_params = ?, updated_at = ? WHERE id = ? RETURNING ${COLS}`,
        [...values(b), Date.now(), id],
      )
      if (!row) throw new NotFound(`template '${id}' not found`)
      const tpl = toTemplate(row)
      wrote(id, tpl)
      return tpl
    },
    async remove(id: string): Promise<void> {
      const n = await db.run('DELETE FROM notify_templates WHERE id = ?', [id])
      if (!n) throw new NotFound(`template '${id}' not found`)
      wrote(id)
    },
  }
}
export type TemplateStore = ReturnType<typeof templateStore>

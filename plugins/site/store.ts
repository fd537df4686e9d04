import { type Db, fromJson, iso, newId } from '../../core/db'
import { Generation } from '../../core/generation'
import { NotFound } from '../../core/http'
import { SingleFlight } from '../../core/single-flight'
import { DEFAULTS, KEY_NAMES, type KeyName, type Settings } from './keys'
import { EMPTY_ROUTING, type Routing } from './routing'

export type Origin = 'default' | 'file' | 'override'

export interface Message {
  id: string
  at: string
  event: string
  level: string
  title: string
  body: string
  data?: Record<string, unknown>
  read: boolean
  readAt?: string
}

interface MessageRow {
  id: string
  at: number | string
  event: string
  level: string
  title: string
  body: string
  data: string | null
  read_at: number | string | null
}

const toMessage = (r: MessageRow): Message => ({
  id: r.id,
  at: iso(Number(r.at))!,
  event: r.event,
  level: r.level,
  title: r.title,
  body: r.body,
  data: r.data ? fromJson<Record<string, unknown>>(r.data, {}) : undefined,
  read: r.read_at !== null,
  readAt: r.read_at === null ? undefined : iso(Number(r.read_at)),
})

/** Every key with its effective value and where it comes from. */
export type Effective = { [K in KeyName]: { value: Settings[K]; origin: Origin } }

/** The values alone. */
export const valuesOf = (e: Effective): Settings =>
  Object.fromEntries(KEY_NAMES.map((k) => [k, e[k].value])) as Settings

/** Bumps the revision inside the writer's transaction, so every instance's copy is dropped. */
async function bump(tx: Db): Promise<void> {
  await tx.run(
    'INSERT INTO site_revision (id, rev) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET rev = site_revision.rev + 1',
  )
}
const revision = async (db: Db) =>
  Number((await db.get<{ rev: number | string }>('SELECT rev FROM site_revision WHERE id = 1'))?.rev ?? 0)

/** The settings and routing as a routed notification reads them: one copy per revision. */
export interface Current {
  effective: Effective
  routing: Routing
}

/**
 * `changed` tells the other instances a write happened (their copy is dropped on hearing it). The
 * API's reads and writes read the store itself; the notification path reads `current()`, a copy
 * taken once per revision: every routed notification had read and parsed every setting twice
 * (its routing, then each channel's send).
 */
export function siteStore(db: Db, file: () => Partial<Settings>, changed: () => void = () => undefined) {
  const compose = (overrides: Map<string, unknown>): Effective => {
    const f = file()
    return Object.fromEntries(
      KEY_NAMES.map((k) => {
        if (overrides.has(k) && overrides.get(k) !== undefined)
          return [k, { value: overrides.get(k), origin: 'override' }]
        if (f[k] !== undefined) return [k, { value: f[k], origin: 'file' }]
        return [k, { value: DEFAULTS[k], origin: 'default' }]
      }),
    ) as never
  }
  const overrides = async () => {
    const rows = await db.all<{ key: string; value: string }>('SELECT key, value FROM site_settings')
    return new Map(rows.map((r) => [r.key, fromJson<unknown>(r.value, undefined)]))
  }
  /**
   * Every key with its effective value and where it comes from: override, else file, else
   * default. With `change`: as it would be after setting (`value`) or clearing that override.
   */
  const effective = async (change?: { key: KeyName; value?: unknown }): Promise<Effective> => {
    const o = await overrides()
    if (change && 'value' in change) o.set(change.key, change.value)
    else if (change) o.delete(change.key)
    return compose(o)
  }
  const routing = async (): Promise<Routing> => {
    const r = await db.get<{ value: string }>("SELECT value FROM site_routing WHERE id = 'ops'")
    return r ? fromJson<Routing>(r.value, EMPTY_ROUTING) : EMPTY_ROUTING
  }

  let copy: (Current & { rev: number }) | undefined
  const loading = new SingleFlight<Current>()
  /** Moves on each write and each notice: a read under way meanwhile is not kept. */
  const changes = new Generation()
  const drop = () => {
    changes.bump()
    copy = undefined
  }
  /**
   * Reads the copy (the revision first: a write landing between the reads leaves a copy older by
   * its revision, which the next `sync` drops). A read met by a write or a notice is read again,
   * and never kept once five were: it could put back what the change replaced.
   */
  async function load(): Promise<Current> {
    const { value, settled } = await changes.settled(async () => {
      const rev = await revision(db)
      const [o, r] = await Promise.all([overrides(), routing()])
      return { rev, effective: compose(o), routing: r }
    })
    if (settled) copy = value
    return value
  }
  const wrote = () => {
    drop()
    changed()
  }

  return {
    effective,
    routing,
    /** The settings and routing a routed notification and its sends use, read once per revision. */
    current(): Promise<Current> {
      if (copy) return Promise.resolve(copy)
      // Callers meanwhile share the one read.
      return loading.run(load)
    },
    /** Another instance wrote: the copy is read again when next needed. */
    drop,
    /** The safety net for a lost notice: drops the copy when the stored revision moved. */
    async sync(): Promise<void> {
      const held = copy
      if (!held) return
      const rev = await revision(db)
      if (copy === held && rev !== held.rev) drop()
    },
    async settings(): Promise<Settings> {
      return valuesOf(await effective())
    },
    async setOverride(key: KeyName, value: unknown, by: string): Promise<void> {
      await db.tx(async (tx) => {
        await tx.run(
          `INSERT INTO site_settings (key, value, updated_at, updated_by) VALUES (?, ?, ?, ?)
           ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at, updated_by = excluded.updated_by`,
          [key, JSON.stringify(value), Date.now(), by],
        )
        await bump(tx)
      })
      wrote()
    },
    /** Whether there was an override to clear. */
    async clearOverride(key: KeyName): Promise<boolean> {
      const had = await db.tx(async (tx) => {
        const n = await tx.run('DELETE FROM site_settings WHERE key = ?', [key])
        if (n > 0) await bump(tx)
        return n > 0
      })
      if (had) wrote()
      return had
    },
    async setRouting(r: Routing): Promise<void> {
      await db.tx(async (tx) => {
        await tx.run(
          `INSERT INTO site_routing (id, value, updated_at) VALUES ('ops', ?, ?)
           ON CONFLICT (id) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
          [JSON.stringify(r), Date.now()],
        )
        await bump(tx)
      })
      wrote()
    },

    async addMessage(m: Omit<Message, 'id' | 'at' | 'read' | 'readAt'>): Promise<Message> {
      const id = newId()
      const at = Date.now()
      await db.run(
        'INSERT INTO site_messages (id, at, event, level, title, body, data, read_at) VALUES (?, ?, ?, ?, ?, ?, ?, NULL)',
        [id, at, m.event, m.level, m.title, m.body, m.data ? JSON.stringify(m.data) : null],
      )
      return { ...m, id, at: iso(at)!, read: false }
    },
    async messages(q: { page: number; size: number; unread?: boolean; event?: string }) {
      const where =
        '(CAST(? AS INTEGER) IS NULL OR (? = 1 AND read_at IS NULL) OR (? = 0 AND read_at IS NOT NULL)) AND (CAST(? AS TEXT) IS NULL OR event = ?)'
      const u = q.unread === undefined ? null : q.unread ? 1 : 0
      const params = [u, u, u, q.event ?? null, q.event ?? null]
      const total = Number(
        (await db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM site_messages WHERE ${where}`, params))?.n ??
          0,
      )
      const unread = Number(
        (await db.get<{ n: number }>('SELECT COUNT(*) AS n FROM site_messages WHERE read_at IS NULL'))?.n ??
          0,
      )
      const rows = await db.all<MessageRow>(
        `SELECT id, at, event, level, title, body, data, read_at FROM site_messages WHERE ${where}
         ORDER BY at DESC, id DESC LIMIT ? OFFSET ?`,
        [...params, q.size, (q.page - 1) * q.size],
      )
      return { items: rows.map(toMessage), total, unread, page: q.page, size: q.size }
    },
    async message(id: string): Promise<Message | undefined> {
      const r = await db.get<MessageRow>(
        'SELECT id, at, event, level, title, body, data, read_at FROM site_messages WHERE id = ?',
        [id],
      )
      return r && toMessage(r)
    },
    async markRead(id: string): Promise<Message> {
      const r = await db.get<MessageRow>(
        'SELECT id, at, event, level, title, body, data, read_at FROM site_messages WHERE id = ?',
        [id],
      )
      if (!r) throw new NotFound(`message '${id}' not found`)
      if (r.read_at === null) {
        const now = Date.now()
        await db.run('UPDATE site_messages SET read_at = ? WHERE id = ? AND read_at IS NULL', [now, id])
        r.read_at = now
      }
      return toMessage(r)
    },
    async markAllRead(): Promise<number> {
      return db.run('UPDATE site_messages SET read_at = ? WHERE read_at IS NULL', [Date.now()])
    },
    /** `message_retention_days`: deletes the messages stored before `before`, in slices; answers how many. */
    async purgeMessages(before: number): Promise<number> {
      let deleted = 0
      for (;;) {
        const n = await db.run(
          'DELETE FROM site_messages WHERE id IN (SELECT id FROM site_messages WHERE at < ? LIMIT 500)',
          [before],
        )
        deleted += n
        if (n < 500) return deleted
      }
    },
  }
}
export type SiteStore = ReturnType<typeof siteStore>

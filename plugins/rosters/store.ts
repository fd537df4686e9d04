import { type Db, fromJson, iso } from '../../core/db'
import { Generation } from '../../core/generation'
import { Conflict, NotFound } from '../../core/http'
import type { StoredPeriod } from './schema'

type Row = { id: string; description: string; periods: string; created_at: number; updated_at: number }
const COLS = 'id, description, periods, created_at, updated_at'

export interface Roster {
  id: string
  description: string
  periods: StoredPeriod[]
  created_at: string
  updated_at: string
}

const toRoster = (r: Row): Roster => ({
  id: r.id,
  description: r.description,
  periods: fromJson(r.periods, []),
  created_at: iso(r.created_at)!,
  updated_at: iso(r.updated_at)!,
})

async function bump(tx: Db) {
  await tx.run(
    'INSERT INTO rosters_revision (id, rev) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET rev = rosters_revision.rev + 1',
  )
}

/**
 * Rosters in the store, and an in-memory copy of every roster's periods as epoch-ms pairs so a
 * silence check on the notify path never touches the store. Local writes update the copy at
 * once; `sync` reloads it when another instance's write bumped the revision.
 */
export function rosterStore(db: Db, publish: () => void = () => undefined) {
  let periods = new Map<string, [number, number][]>()
  let rev = -1
  /** Writes this instance applied to the copy itself, for `sync`. */
  const ownWrites = new Generation()
  const cache = (r: Roster) =>
    periods.set(
      r.id,
      r.periods.map((p) => [Date.parse(p.start), Date.parse(p.end)]),
    )

  let syncing: Promise<void> = Promise.resolve()
  /**
   * Reloads the copy when the revision moved. A roster this instance wrote while the store was
   * being read may be missing from what was read (on PostgreSQL the reads wait on the network,
   * and a request runs in between): installing that would lose the write until the next sync,
   * so such a read is read again.
   */
  async function syncOnce(): Promise<void> {
    const read = await ownWrites.settled(async () => {
      const row = await db.get<{ rev: number }>('SELECT rev FROM rosters_revision WHERE id = 1')
      const now = Number(row?.rev ?? 0)
      return now === rev
        ? undefined
        : { now, all: (await db.all<Row>(`SELECT ${COLS} FROM rosters`)).map(toRoster) }
    })
    if (!read.settled || !read.value) return
    periods = new Map()
    for (const r of read.value.all) cache(r)
    rev = read.value.now
  }

  return {
    covers(id: string, now: number): boolean {
      const ps = periods.get(id)
      if (!ps) return false
      // Sorted and disjoint: binary search for the last period starting at or before now.
      let lo = 0
      let hi = ps.length - 1
      while (lo <= hi) {
        const mid = (lo + hi) >> 1
        if (ps[mid][0] <= now) lo = mid + 1
        else hi = mid - 1
      }
      return hi >= 0 && now < ps[hi][1]
    },
    /**
     * Reloads the copy when the revision moved (`syncOnce`), one sync after another: a slower,
     * older one (a notice's and the timer's may overlap) must not finish after a newer one and
     * put its older copy back.
     */
    sync(): Promise<void> {
      const next = syncing.then(syncOnce)
      syncing = next.catch(() => undefined)
      return next
    },
    async list(): Promise<Roster[]> {
      return (await db.all<Row>(`SELECT ${COLS} FROM rosters ORDER BY id`)).map(toRoster)
    },
    async get(id: string): Promise<Roster> {
      const row = await db.get<Row>(`SELECT ${COLS} FROM rosters WHERE id = ?`, [id])
      if (!row) throw new NotFound(`roster '${id}' not found`)
      return toRoster(row)
    },
    async create(id: string, description: string, ps: StoredPeriod[]): Promise<Roster> {
      const now = Date.now()
      const r = await db.tx(async (tx) => {
        const row = await tx.get<Row>(
          `INSERT INTO rosters (${COLS}) VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING ${COLS}`,
          [id, description, JSON.stringify(ps), now, now],
        )
        if (!row) throw new Conflict(`roster '${id}' already exists`)
        await bump(tx)
        return toRoster(row)
      })
      cache(r)
      ownWrites.bump()
      publish()
      return r
    },
    /** Replaces a roster's periods (and description when given); `create` upserts (iCalendar import). */
    async replace(id: string, description: string | undefined, ps: StoredPeriod[], create = false) {
      const now = Date.now()
      const r = await db.tx(async (tx) => {
        const row = create
          ? await tx.get<Row>(
              `INSERT INTO rosters (${COLS}) VALUES (?, ?, ?, ?, ?)
               ON CONFLICT (id) DO UPDATE SET periods = excluded.periods, updated_at = excluded.updated_at
               RETURNING ${COLS}`,
              [id, description ?? '', JSON.stringify(ps), now, now],
            )
          : await tx.get<Row>(
              `UPDATE rosters SET description = COALESCE(CAST(? AS TEXT), description), periods = ?, updated_at = ?
               WHERE id = ? RETURNING ${COLS}`,
              [description ?? null, JSON.stringify(ps), now, id],
            )
        if (!row) throw new NotFound(`roster '${id}' not found`)
        await bump(tx)
        return toRoster(row)
      })
      cache(r)
      ownWrites.bump()
      publish()
      return r
    },
    async remove(id: string) {
      await db.tx(async (tx) => {
        if (!(await tx.run('DELETE FROM rosters WHERE id = ?', [id])))
          throw new NotFound(`roster '${id}' not found`)
        await bump(tx)
      })
      periods.delete(id)
      ownWrites.bump()
      publish()
    },
  }
}
export type RosterStore = ReturnType<typeof rosterStore>

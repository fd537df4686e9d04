import { type Db, fromJson, iso } from '../../core/db'
import { atCap } from '../../core/db/room'
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

/** Bumps the revision inside the writer's transaction, so other instances reload; answers the new one. */
async function bump(tx: Db): Promise<number> {
  const row = await tx.get<{ rev: number }>(
    'INSERT INTO rosters_revision (id, rev) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET rev = rosters_revision.rev + 1 RETURNING rev',
  )
  return Number(row?.rev)
}

/**
 * At most MAX_ROSTERS rosters (409 for a new one past it), and a list answers at most that many
 * at once: 1,000 rosters of 512 periods had made one list 38 MB and held the loop 590 ms.
 */
export const MAX_ROSTERS = 200

/** A new roster past MAX_ROSTERS is refused (inside the writer's transaction). */
async function room(tx: Db, id: string) {
  if (await tx.get('SELECT id FROM rosters WHERE id = ?', [id])) return
  if (await atCap(tx, { pg: 72_410_007, mysql: 'liveops_rosters', waitS: 10 }, 'rosters', MAX_ROSTERS))
    throw new Conflict(`at most ${MAX_ROSTERS} rosters: delete one first`)
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
  /**
   * A write this instance applied to its copy: when it was the only one since the copy's revision,
   * the copy is current at its revision and the next sync reads nothing (it had re-read and parsed
   * every roster after each local write: 814 ms per PUT at 1,000 rosters of 512 periods).
   */
  const ownWrite = (written: number) => {
    ownWrites.bump()
    if (rev === written - 1) rev = written
  }
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
    /** Rosters by id, the first `limit` after `after` (a page's last id). */
    async list(limit = MAX_ROSTERS, after = ''): Promise<Roster[]> {
      return (
        await db.all<Row>(`SELECT ${COLS} FROM rosters WHERE id > ? ORDER BY id LIMIT ?`, [after, limit])
      ).map(toRoster)
    },
    async get(id: string): Promise<Roster> {
      const row = await db.get<Row>(`SELECT ${COLS} FROM rosters WHERE id = ?`, [id])
      if (!row) throw new NotFound(`roster '${id}' not found`)
      return toRoster(row)
    },
    async create(id: string, description: string, ps: StoredPeriod[]): Promise<Roster> {
      const now = Date.now()
      const r = await db.tx(async (tx) => {
        await room(tx, id)
        const row = await tx.get<Row>(
          `INSERT INTO rosters (${COLS}) VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING ${COLS}`,
          [id, description, JSON.stringify(ps), now, now],
        )
        if (!row) throw new Conflict(`roster '${id}' already exists`)
        return { roster: toRoster(row), rev: await bump(tx) }
      })
      cache(r.roster)
      ownWrite(r.rev)
      publish()
      return r.roster
    },
    /** Replaces a roster's periods (and description when given); `create` upserts (iCalendar import). */
    async replace(id: string, description: string | undefined, ps: StoredPeriod[], create = false) {
      const now = Date.now()
      const r = await db.tx(async (tx) => {
        if (create) await room(tx, id)
        const row = create
          ? await tx.get<Row>(
              `INSERT INTO rosters (${COLS}) VALUES (?, ?, ?, ?, ?)
               ON CONFLICT (id) DO UPDATE SET periods = excluded.periods, updated_at = excluded.updated_at
               RETURNING ${COLS}`,
              [id, description ?? '', JSON.stringify(ps), now, now],
            )
          : // The description is set only when given: COALESCE over a cast parameter mixed two
            // collations on MySQL/MariaDB (the NO PAD column and the cast), and every PUT was a 500.
            await tx.get<Row>(
              `UPDATE rosters SET ${description === undefined ? '' : 'description = ?, '}periods = ?, updated_at = ?
               WHERE id = ? RETURNING ${COLS}`,
              [...(description === undefined ? [] : [description]), JSON.stringify(ps), now, id],
            )
        if (!row) throw new NotFound(`roster '${id}' not found`)
        return { roster: toRoster(row), rev: await bump(tx) }
      })
      cache(r.roster)
      ownWrite(r.rev)
      publish()
      return r.roster
    },
    async remove(id: string) {
      const written = await db.tx(async (tx) => {
        if (!(await tx.run('DELETE FROM rosters WHERE id = ?', [id])))
          throw new NotFound(`roster '${id}' not found`)
        return bump(tx)
      })
      periods.delete(id)
      ownWrite(written)
      publish()
    },
  }
}
export type RosterStore = ReturnType<typeof rosterStore>

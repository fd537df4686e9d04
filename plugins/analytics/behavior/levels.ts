import type { Db } from '../../../core/db'
import { HyperLogLog } from '../lib/hll'
import { type DayScope, type TimeScope, date, iso, round } from './behavior'
import { sep } from './behavior-rollup'

const n = (v: unknown) => Number(v ?? 0)
/** Level names in play order: numbers by value ("2" before "10"), then text. */
const natural = new Intl.Collator('en', { numeric: true }).compare

interface Stat {
  starts: number
  completes: number
  fails: number
  durationSum: number
  durationN: number
  players: HyperLogLog
}

/**
 * Level analytics (spec 1 `/levels`, issue 17) from the behavior rollup: per level (and per
 * episode) starts, completes, fails, distinct players and completion durations per local day;
 * death points per map by client time.
 */
export function levelAnalytics(db: Db) {
  /** Per `episode \u0001 level` of the range, its counters and merged players. */
  async function stats(q: DayScope & { episode?: string }): Promise<Map<string, Stat>> {
    const [rows, sk] = await Promise.all([
      db.all<{ kind: string; name: string; n: number; total: number }>(
        `SELECT kind, name, SUM(n) AS n, SUM(total) AS total FROM analytics_behavior_day
         WHERE game_id = ? AND env = ? AND day >= ? AND day <= ?
           AND kind IN ('level.start', 'level.complete', 'level.fail', 'level.duration')
         GROUP BY kind, name`,
        [q.gameId, q.env, q.from, q.to],
      ),
      db.all<{ name: string; sketch: string }>(
        `SELECT name, sketch FROM analytics_behavior_sketch
         WHERE game_id = ? AND env = ? AND day >= ? AND day <= ? AND kind = 'level'`,
        [q.gameId, q.env, q.from, q.to],
      ),
    ])
    const out = new Map<string, Stat>()
    // One episode: its keys start with its name and the separator.
    const wanted = (name: string) => q.episode === undefined || name.startsWith(`${q.episode}${sep}`)
    const get = (name: string) => {
      let s = out.get(name)
      if (!s) {
        s = { starts: 0, completes: 0, fails: 0, durationSum: 0, durationN: 0, players: new HyperLogLog() }
        out.set(name, s)
      }
      return s
    }
    for (const r of rows) {
      if (!wanted(r.name)) continue
      const s = get(r.name)
      if (r.kind === 'level.start') s.starts += n(r.n)
      else if (r.kind === 'level.complete') s.completes += n(r.n)
      else if (r.kind === 'level.fail') s.fails += n(r.n)
      else {
        s.durationN += n(r.n)
        s.durationSum += n(r.total)
      }
    }
    for (const r of sk) if (wanted(r.name)) get(r.name).players.merge(HyperLogLog.parse(r.sketch))
    return out
  }

  /** Stats merged by a part of the key (the level, or the episode). */
  function groupBy(all: Map<string, Stat>, part: (episode: string, level: string) => string) {
    const out = new Map<string, Stat & { levels: Set<string> }>()
    for (const [key, s] of all) {
      const i = key.indexOf(sep)
      const episode = key.slice(0, i)
      const level = key.slice(i + 1)
      const k = part(episode, level)
      let g = out.get(k)
      if (!g) {
        g = {
          starts: 0,
          completes: 0,
          fails: 0,
          durationSum: 0,
          durationN: 0,
          players: new HyperLogLog(),
          levels: new Set(),
        }
        out.set(k, g)
      }
      g.starts += s.starts
      g.completes += s.completes
      g.fails += s.fails
      g.durationSum += s.durationSum
      g.durationN += s.durationN
      g.players.merge(s.players)
      g.levels.add(level)
    }
    return [...out.entries()].sort((a, b) => natural(a[0], b[0]))
  }

  const metrics = (s: Stat) => ({
    starts: s.starts,
    completes: s.completes,
    fails: s.fails,
    players: s.players.count(),
    passRate: s.starts ? round(s.completes / s.starts) : 0,
    failRate: s.starts ? round(s.fails / s.starts) : 0,
    avgDurationMs: s.durationN ? Math.round(s.durationSum / s.durationN) : null,
  })

  return {
    /** Per level (episodes merged, or one `episode`), in play order, and the level funnel. */
    async levels(q: DayScope & { episode?: string }) {
      const groups = groupBy(await stats(q), (_, level) => level)
      const levels = groups.map(([level, s]) => ({ level, ...metrics(s) }))
      const first = levels[0]?.players ?? 0
      return {
        startDate: date(q.from),
        endDate: date(q.to),
        ...(q.episode === undefined ? {} : { episode: q.episode }),
        levels,
        funnel: levels.map((l) => ({
          level: l.level,
          players: l.players,
          shareOfFirst: first ? round(l.players / first) : 0,
        })),
      }
    },

    /** The same per episode (events without an episode are under ""). */
    async episodes(q: DayScope) {
      const groups = groupBy(await stats(q), (episode) => episode)
      return {
        startDate: date(q.from),
        endDate: date(q.to),
        episodes: groups.map(([episode, s]) => ({ episode, levels: s.levels.size, ...metrics(s) })),
      }
    },

    /**
     * Deaths on a map in client time `[from, to)`: a `cells` x `cells` grid over the bounds
     * (given, else the deaths' own), row by row from the smallest y, and the newest `limit` points.
     */
    async map(
      q: TimeScope & {
        map: string
        cells: number
        limit: number
        bounds: { minX?: number; maxX?: number; minY?: number; maxY?: number }
      },
    ) {
      const base = 'game_id = ? AND env = ? AND map = ? AND ts >= ? AND ts < ?'
      const p = [q.gameId, q.env, q.map, q.from, q.to]
      const span = await db.get<{
        x0: number | null
        x1: number | null
        y0: number | null
        y1: number | null
      }>(
        `SELECT MIN(x) AS x0, MAX(x) AS x1, MIN(y) AS y0, MAX(y) AS y1 FROM analytics_death WHERE ${base}`,
        p,
      )
      const milli = (v: number | undefined, fallback: unknown) =>
        v === undefined ? n(fallback) : Math.round(v * 1000)
      const x0 = milli(q.bounds.minX, span?.x0)
      const x1 = milli(q.bounds.maxX, span?.x1)
      const y0 = milli(q.bounds.minY, span?.y0)
      const y1 = milli(q.bounds.maxY, span?.y1)
      // A cell is [x0 + i w, x0 + (i+1) w); the upper bound itself falls in the last cell.
      const cells = q.cells
      const wx = Math.max(1, x1 - x0)
      const wy = Math.max(1, y1 - y0)
      // Integer division: MySQL's `/` divides exactly.
      const div = db.dialect === 'mysql' ? 'DIV' : '/'
      const cell = (v: string, lo: number, w: number) =>
        `CASE WHEN (${v} - ${lo}) * ${cells} ${div} ${w} >= ${cells} THEN ${cells - 1} ELSE (${v} - ${lo}) * ${cells} ${div} ${w} END`
      const [bins, points] = await Promise.all([
        db.all<{ cx: number; cy: number; n: number }>(
          `SELECT cx, cy, COUNT(*) AS n FROM (SELECT ${cell('x', x0, wx)} AS cx, ${cell('y', y0, wy)} AS cy FROM analytics_death
           WHERE ${base} AND x >= ? AND x <= ? AND y >= ? AND y <= ?) t GROUP BY cx, cy`,
          [...p, x0, x1, y0, y1],
        ),
        db.all<{ ts: number; x: number; y: number; level: string; user_id: string | null }>(
          `SELECT ts, x, y, level, user_id FROM analytics_death WHERE ${base} ORDER BY ts DESC, id DESC LIMIT ?`,
          [...p, q.limit],
        ),
      ])
      const grid = Array.from({ length: cells }, () => new Array<number>(cells).fill(0))
      let total = 0
      for (const b of bins) {
        grid[n(b.cy)][n(b.cx)] += n(b.n)
        total += n(b.n)
      }
      const empty = span?.x0 == null && Object.values(q.bounds).every((v) => v === undefined)
      return {
        map: q.map,
        startDate: iso(q.from),
        endDate: iso(q.to),
        cells,
        bounds: empty ? null : { minX: x0 / 1000, maxX: x1 / 1000, minY: y0 / 1000, maxY: y1 / 1000 },
        deaths: total,
        grid,
        points: points.map((r) => ({
          x: n(r.x) / 1000,
          y: n(r.y) / 1000,
          level: r.level,
          userId: r.user_id,
          timestamp: iso(n(r.ts)),
        })),
      }
    },
  }
}

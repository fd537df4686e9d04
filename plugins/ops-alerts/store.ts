import { type Db, fromJson, iso, newId } from '../../core/db'
import { atCap } from '../../core/db/room'
import { keptKey } from '../../core/digest'
import { Conflict, NotFound } from '../../core/http'

import type { Rule, RuleCreate, RuleUpdate } from './schema'

/** Ops alert rules kept at once. */
export const MAX_RULES = 500
/** A rule's cooldown when it names none (or the evaluation interval, when longer). */
export const DEFAULT_COOLDOWN_S = 300

interface Row {
  id: string
  name: string
  metric: string
  labels: string
  operator: string
  threshold: number | string
  for_count: number | string
  cooldown_s: number | string
  level: string
  enabled: number | string
  created_at: number | string
  updated_at: number | string
}
/** A series' text is its key up to this many characters, past it its digest (MySQL keys are VARCHAR(191)). */
const SERIES_KEY = 160

const COLS =
  'id, name, metric, labels, operator, threshold, for_count, cooldown_s, level, enabled, created_at, updated_at'

const toRule = (r: Row): Rule => ({
  id: r.id,
  name: r.name,
  metric: r.metric,
  labels: fromJson<Record<string, string>>(r.labels, {}),
  operator: r.operator as Rule['operator'],
  threshold: Number(r.threshold),
  forCount: Number(r.for_count),
  cooldownSeconds: Number(r.cooldown_s),
  level: r.level as Rule['level'],
  enabled: Number(r.enabled) === 1,
  createdAt: iso(Number(r.created_at))!,
  updatedAt: iso(Number(r.updated_at))!,
})

export function alertStore(db: Db, opts: { defaultCooldownS?: () => number } = {}) {
  const get = async (id: string): Promise<Rule> => {
    const r = await db.get<Row>(`SELECT ${COLS} FROM ops_alert_rules WHERE id = ?`, [id])
    if (!r) throw new NotFound(`alert rule '${id}' not found`)
    return toRule(r)
  }
  const write = async (r: Omit<Rule, 'createdAt' | 'updatedAt'>, created: number, tx: Db = db) => {
    await tx.run(
      `INSERT INTO ops_alert_rules (${COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET name = excluded.name, metric = excluded.metric, labels = excluded.labels,
         operator = excluded.operator, threshold = excluded.threshold, for_count = excluded.for_count,
         cooldown_s = excluded.cooldown_s, level = excluded.level, enabled = excluded.enabled, updated_at = excluded.updated_at`,
      [
        r.id,
        r.name,
        r.metric,
        JSON.stringify(r.labels),
        r.operator,
        r.threshold,
        r.forCount,
        r.cooldownSeconds,
        r.level,
        r.enabled ? 1 : 0,
        created,
        Date.now(),
      ],
    )
  }
  return {
    get,
    async list(): Promise<Rule[]> {
      return (await db.all<Row>(`SELECT ${COLS} FROM ops_alert_rules ORDER BY created_at, id`)).map(toRule)
    },
    async create(b: RuleCreate): Promise<Rule> {
      const id = newId()
      // Each evaluation reads them all: counted with the insert, under a lock.
      await db.tx(async (tx) => {
        if (
          await atCap(
            tx,
            { pg: 72_410_011, mysql: 'liveops_ops_alert_rules', waitS: 10 },
            'ops_alert_rules',
            MAX_RULES,
          )
        )
          throw new Conflict(`at most ${MAX_RULES} ops alert rules: delete one first`)
        await write(
          {
            id,
            name: b.name,
            metric: b.metric,
            labels: b.labels ?? {},
            operator: b.operator,
            threshold: b.threshold,
            forCount: b.forCount ?? 1,
            cooldownSeconds: b.cooldownSeconds ?? opts.defaultCooldownS?.() ?? DEFAULT_COOLDOWN_S,
            level: b.level,
            enabled: b.enabled ?? true,
          },
          Date.now(),
          tx,
        )
      })
      return get(id)
    },
    /** Changes only the fields named; answers the rule before and after. */
    async update(id: string, b: RuleUpdate): Promise<{ before: Rule; after: Rule }> {
      const before = await get(id)
      const { createdAt, updatedAt: _, ...rest } = before
      await write({ ...rest, ...b }, Date.parse(createdAt))
      return { before, after: await get(id) }
    },
    async remove(id: string): Promise<Rule> {
      const before = await get(id)
      await db.tx(async (tx) => {
        await tx.run('DELETE FROM ops_alert_fired WHERE rule_id = ?', [id])
        await tx.run('DELETE FROM ops_alert_rules WHERE id = ?', [id])
      })
      return before
    },
    /**
     * Claims a firing: true for the one caller (of any instance) that moved last_fired_at past
     * the cooldown, so instances sharing the store raise each alert once.
     */
    async claim(
      ruleId: string,
      series: string,
      value: number,
      now: number,
      cooldownMs: number,
    ): Promise<boolean> {
      const key = keptKey(series, SERIES_KEY)
      return db.tx(async (tx) => {
        const changed = await tx.run(
          'UPDATE ops_alert_fired SET last_fired_at = ?, last_value = ? WHERE rule_id = ? AND series = ? AND last_fired_at <= ?',
          [now, value, ruleId, key, now - cooldownMs],
        )
        if (changed) return true
        const inserted = await tx.run(
          'INSERT INTO ops_alert_fired (rule_id, series, label, last_fired_at, last_value) VALUES (?, ?, ?, ?, ?) ON CONFLICT (rule_id, series) DO NOTHING',
          [ruleId, key, series, now, value],
        )
        return inserted > 0
      })
    },
    async lastFired(
      ruleId: string,
    ): Promise<Array<{ series: string; lastFiredAt: string; lastValue: number }>> {
      const rows = await db.all<{
        series: string
        label: string | null
        last_fired_at: number | string
        last_value: number | string
      }>(
        'SELECT series, label, last_fired_at, last_value FROM ops_alert_fired WHERE rule_id = ? ORDER BY series',
        [ruleId],
      )
      return rows.map((r) => ({
        series: r.label ?? r.series,
        lastFiredAt: iso(Number(r.last_fired_at))!,
        lastValue: Number(r.last_value),
      }))
    },
  }
}
export type AlertStore = ReturnType<typeof alertStore>

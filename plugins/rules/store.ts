import { type Db, fromJson, iso } from '../../core/db'
import { atCap } from '../../core/db/room'
import { Conflict, NotFound, invalidField } from '../../core/http'
import type { GroupBody, RuleBody } from './schema'

/** A rule as stored: the saved body with its id, mode and action filled in. */
export type SavedRule = RuleBody & {
  id: string
  mode: 'active' | 'shadow' | 'off'
  action: 'route' | 'allow' | 'suppress'
}

export interface RuleRecord {
  rule: SavedRule
  seq: number
  created_at: number
  updated_at: number
}

export interface GroupRecord {
  id: string
  description: string
  members: { channel: string; recipients?: string[] }[]
  created_at: string
  updated_at: string
}

/**
 * At most MAX_GROUPS groups, each naming at most MAX_GROUP_RECIPIENTS recipients in all (what one
 * delivery carries): 20 groups of 200 members x 500 recipients (4.6 MB each) were parsed whole at
 * every read of one group and every sync, and could never have been delivered.
 */
export const MAX_GROUPS = 200
export const MAX_GROUP_RECIPIENTS = 1_000

/** 400 naming `body.members` past MAX_GROUP_RECIPIENTS recipients. */
function checkRecipients(g: GroupBody) {
  const n = g.members.reduce((sum, m) => sum + (m.recipients?.length ?? 0), 0)
  if (n > MAX_GROUP_RECIPIENTS)
    throw invalidField(
      'body.members',
      `at most ${MAX_GROUP_RECIPIENTS} recipients in a group in all, got ${n}`,
    )
}

type RuleRow = { id: string; seq: number; body: string; created_at: number; updated_at: number }
type GroupRow = { id: string; description: string; members: string; created_at: number; updated_at: number }

const toRule = (r: RuleRow): RuleRecord => ({
  rule: fromJson<SavedRule>(r.body, { id: r.id, match: 'false', mode: 'off', action: 'route' }),
  seq: Number(r.seq),
  created_at: Number(r.created_at),
  updated_at: Number(r.updated_at),
})
const toGroup = (r: GroupRow): GroupRecord => ({
  id: r.id,
  description: r.description,
  members: fromJson(r.members, []),
  created_at: iso(r.created_at)!,
  updated_at: iso(r.updated_at)!,
})

/** Bumps a kind's revision inside the writer's transaction, so other instances reload it; answers the new one. */
export async function bump(tx: Db, kind: string): Promise<number> {
  const row = await tx.get<{ rev: number }>(
    'INSERT INTO rules_revisions (kind, rev) VALUES (?, 1) ON CONFLICT (kind) DO UPDATE SET rev = rules_revisions.rev + 1 RETURNING rev',
    [kind],
  )
  return Number(row?.rev)
}

/**
 * On PostgreSQL a rule write and its revision bump go as one statement (data-modifying CTEs are
 * atomic): one round trip instead of a four-statement transaction. SQLite keeps the transaction,
 * which costs nothing there.
 */
const BUMP_RULES_PG = `b AS (INSERT INTO rules_revisions (kind, rev) SELECT 'rules', 1 FROM w
  ON CONFLICT (kind) DO UPDATE SET rev = rules_revisions.rev + 1 RETURNING rev)`

/** A rule write's row and the rules revision it produced (the writer then knows it is current). */
type Written = RuleRecord & { rev: number }
const written = (r: RuleRow & { rev: number }): Written => ({ ...toRule(r), rev: Number(r.rev) })

export function rulesStore(db: Db) {
  const pg = db.dialect === 'postgres'
  return {
    async revisions(): Promise<Record<string, number>> {
      const rows = await db.all<{ kind: string; rev: number }>('SELECT kind, rev FROM rules_revisions')
      return Object.fromEntries(rows.map((r) => [r.kind, Number(r.rev)]))
    },
    async listRules(): Promise<RuleRecord[]> {
      return (
        await db.all<RuleRow>('SELECT id, seq, body, created_at, updated_at FROM rules_rules ORDER BY seq')
      ).map(toRule)
    },
    async getRule(id: string): Promise<RuleRecord | undefined> {
      const row = await db.get<RuleRow>(
        'SELECT id, seq, body, created_at, updated_at FROM rules_rules WHERE id = ?',
        [id],
      )
      return row && toRule(row)
    },
    async createRule(rule: SavedRule): Promise<Written> {
      const now = Date.now()
      if (pg) {
        const row = await db.get<RuleRow & { rev: number }>(
          `WITH w AS (INSERT INTO rules_rules (id, seq, body, created_at, updated_at)
             SELECT CAST(? AS TEXT), COALESCE(MAX(seq), 0) + 1, CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS BIGINT) FROM rules_rules
             ON CONFLICT (id) DO NOTHING RETURNING id, seq, body, created_at, updated_at), ${BUMP_RULES_PG}
           SELECT id, seq, body, created_at, updated_at, b.rev FROM w, b`,
          [rule.id, JSON.stringify(rule), now, now],
        )
        if (!row) throw new Conflict(`rule '${rule.id}' already exists`)
        return written(row)
      }
      return db.tx(async (tx) => {
        const row = await tx.get<RuleRow>(
          `INSERT INTO rules_rules (id, seq, body, created_at, updated_at)
           SELECT CAST(? AS TEXT), COALESCE(MAX(seq), 0) + 1, CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS BIGINT) FROM rules_rules WHERE true
           ON CONFLICT (id) DO NOTHING RETURNING id, seq, body, created_at, updated_at`,
          [rule.id, JSON.stringify(rule), now, now],
        )
        if (!row) throw new Conflict(`rule '${rule.id}' already exists`)
        return { ...toRule(row), rev: await bump(tx, 'rules') }
      })
    },
    async updateRule(rule: SavedRule): Promise<Written> {
      if (pg) {
        const row = await db.get<RuleRow & { rev: number }>(
          `WITH w AS (UPDATE rules_rules SET body = ?, updated_at = ? WHERE id = ?
             RETURNING id, seq, body, created_at, updated_at), ${BUMP_RULES_PG}
           SELECT id, seq, body, created_at, updated_at, b.rev FROM w, b`,
          [JSON.stringify(rule), Date.now(), rule.id],
        )
        if (!row) throw new NotFound(`rule '${rule.id}' not found`)
        return written(row)
      }
      return db.tx(async (tx) => {
        const row = await tx.get<RuleRow>(
          'UPDATE rules_rules SET body = ?, updated_at = ? WHERE id = ? RETURNING id, seq, body, created_at, updated_at',
          [JSON.stringify(rule), Date.now(), rule.id],
        )
        if (!row) throw new NotFound(`rule '${rule.id}' not found`)
        return { ...toRule(row), rev: await bump(tx, 'rules') }
      })
    },
    /** Answers the rules revision the delete produced. */
    async deleteRule(id: string): Promise<number> {
      if (pg) {
        const row = await db.get<{ rev: number }>(
          `WITH w AS (DELETE FROM rules_rules WHERE id = ? RETURNING id), ${BUMP_RULES_PG} SELECT b.rev FROM w, b`,
          [id],
        )
        if (!row) throw new NotFound(`rule '${id}' not found`)
        return Number(row.rev)
      }
      return db.tx(async (tx) => {
        if (!(await tx.run('DELETE FROM rules_rules WHERE id = ?', [id])))
          throw new NotFound(`rule '${id}' not found`)
        return bump(tx, 'rules')
      })
    },
    async getGroup(id: string): Promise<GroupRecord> {
      const row = await db.get<GroupRow>(
        'SELECT id, description, members, created_at, updated_at FROM rules_groups WHERE id = ?',
        [id],
      )
      if (!row) throw new NotFound(`group '${id}' not found`)
      return toGroup(row)
    },
    async listGroups(): Promise<GroupRecord[]> {
      return (
        await db.all<GroupRow>(
          'SELECT id, description, members, created_at, updated_at FROM rules_groups ORDER BY id',
        )
      ).map(toGroup)
    },
    /** The group, and the groups revision its write made (the runtime's own write). */
    async createGroup(g: GroupBody & { id: string }): Promise<GroupRecord & { rev: number }> {
      checkRecipients(g)
      const now = Date.now()
      return db.tx(async (tx) => {
        if (
          await atCap(
            tx,
            { pg: 72_410_008, mysql: 'liveops_rule_groups', waitS: 10 },
            'rules_groups',
            MAX_GROUPS,
          )
        )
          throw new Conflict(`at most ${MAX_GROUPS} groups: delete one first`)
        const row = await tx.get<GroupRow>(
          `INSERT INTO rules_groups (id, description, members, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (id) DO NOTHING RETURNING id, description, members, created_at, updated_at`,
          [g.id, g.description ?? '', JSON.stringify(g.members), now, now],
        )
        if (!row) throw new Conflict(`group '${g.id}' already exists`)
        return { ...toGroup(row), rev: await bump(tx, 'groups') }
      })
    },
    async updateGroup(g: GroupBody & { id: string }): Promise<GroupRecord & { rev: number }> {
      checkRecipients(g)
      return db.tx(async (tx) => {
        const row = await tx.get<GroupRow>(
          `UPDATE rules_groups SET description = ?, members = ?, updated_at = ? WHERE id = ?
           RETURNING id, description, members, created_at, updated_at`,
          [g.description ?? '', JSON.stringify(g.members), Date.now(), g.id],
        )
        if (!row) throw new NotFound(`group '${g.id}' not found`)
        return { ...toGroup(row), rev: await bump(tx, 'groups') }
      })
    },
    /** The groups revision the deletion made. */
    async deleteGroup(id: string): Promise<number> {
      return db.tx(async (tx) => {
        if (!(await tx.run('DELETE FROM rules_groups WHERE id = ?', [id])))
          throw new NotFound(`group '${id}' not found`)
        return bump(tx, 'groups')
      })
    },
  }
}
export type RulesStore = ReturnType<typeof rulesStore>

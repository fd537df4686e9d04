import type { Db } from '../../core/db'
import type { LogRow } from '../../core/event-log-types'
import type { Logger } from '../../core/log'
import { turn } from '../../core/turn'
import { type Stream, forgetRaw, forgetTables } from './store/forget'

export interface Forgetter {
  tables: readonly string[]
  after?: (s: Stream) => void
}

/** A forgetting stopped between two slices (the app stops): the next start's sweep resumes it. */
class Stopped extends Error {}

/** `ingest_forgetting.env` of a whole game's deletion. */
const EVERY_ENV = ''

const keyOf = (gameId: string, env: string | undefined) => `${gameId}\n${env ?? EVERY_ENV}`

/**
 * What a deleted environment or game leaves in the event store goes in slices, in the
 * background, and survives a restart (migration 011):
 *
 * - The instance that deleted it records it in `ingest_forgetting` before its answer; the rows go
 *   (store/forget.ts: raw rows, then, once this process's consumers took in what was committed
 *   before, their results), then the record. A stop between two slices leaves the record, and
 *   the sweep (`sweep`, the `ingest.forget` job, at start and every 10 minutes) takes it up again,
 *   as it does streams whose environment is gone without a record (a process that stopped before
 *   it wrote one, or a release before it existed).
 * - Meanwhile the event log delivers no row of it to any consumer of this process (`withheld`,
 *   `LogSource.withheld`): a consumer behind would otherwise put rows back into a table its slices
 *   had passed. Of a game, every row; of an environment, the rows received until its deletion (one
 *   created again under its name counts its own). Every instance hears of the deletion (the games
 *   service's change notices) and withholds them too.
 */
export class Forgetting {
  /** Deleted streams, with when: this process's consumers take none of their rows. */
  private readonly gone = new Map<string, number>()
  private readonly running = new Map<string, Promise<void>>()
  private stopped = false

  constructor(
    private readonly o: {
      db: () => Db
      forgetters: readonly Forgetter[]
      /** Resolves once the commits this process accepted so far are stored. */
      idle: () => Promise<void>
      /** Resolves once this process's consumers took in what is committed (bounded). */
      drain: () => Promise<void>
      exists: (gameId: string, env: string) => Promise<boolean>
      log: Logger
    },
  ) {}

  withheld(row: LogRow): boolean {
    if (this.gone.size === 0) return false
    if (this.gone.has(keyOf(row.gameId, undefined))) return true
    const at = this.gone.get(keyOf(row.gameId, row.env))
    return at !== undefined && row.receivedAt <= at
  }

  /** Another instance deleted it: this process's consumers take no more of its rows. */
  heard(s: Stream, at: number): void {
    this.gone.set(keyOf(s.gameId, s.env), at)
  }

  /** This instance deleted it: recorded before the answer, its rows deleted in the background. */
  async deleted(s: Stream, at: number): Promise<void> {
    await this.mark(s, at)
    void this.forget(s, true)
  }

  /** The deletions recorded in the store (at start, before the consumers run). */
  async load(): Promise<void> {
    for (const m of await this.marks()) this.heard(m.stream, m.at)
  }

  /**
   * Forgets what recorded deletions left (an instance stopped during one) and streams whose
   * environment no longer exists. `drain`: whether this process's consumers are running (not at
   * start, before they start: no batch of theirs is then in flight).
   */
  async sweep(drain: boolean, signal?: AbortSignal): Promise<void> {
    for (const m of await this.marks()) {
      if (this.stopped || signal?.aborted) return
      await this.forget(m.stream, drain, signal)
    }
    const streams = await this.o
      .db()
      .all<{ game_id: string; env: string }>('SELECT game_id, env FROM ingest_streams ORDER BY game_id, env')
    for (const st of streams) {
      if (this.stopped || signal?.aborted) return
      if (await this.o.exists(st.game_id, st.env)) continue
      this.o.log.warn('forgetting the events of an environment that no longer exists', {
        gameId: st.game_id,
        env: st.env,
      })
      const s = { gameId: st.game_id, env: st.env }
      const at = Date.now()
      await this.mark(s, at)
      await this.forget(s, drain, signal)
    }
  }

  /** Runs the one-time clean-up `name` (`ingest_sweeps`) when still to run; a stop leaves it for the next start. */
  async once(
    name: string,
    signal: AbortSignal | undefined,
    run: (pause: () => Promise<void>) => Promise<void>,
  ): Promise<void> {
    const db = this.o.db()
    if (!(await db.get('SELECT name FROM ingest_sweeps WHERE name = ?', [name]))) return
    try {
      await run(this.pause(signal))
    } catch (e) {
      if (e instanceof Stopped) return
      throw e
    }
    await db.run('DELETE FROM ingest_sweeps WHERE name = ?', [name])
  }

  /** Stops every forgetting at its next slice (each resumes at the next start) and waits for them. */
  async stop(): Promise<void> {
    this.stopped = true
    await Promise.all(this.running.values())
  }

  /** A turn of the event loop between two slices; throws `Stopped` once the app stops. */
  private pause(signal?: AbortSignal): () => Promise<void> {
    return async () => {
      await turn()
      if (this.stopped || signal?.aborted) throw new Stopped()
    }
  }

  private async marks(): Promise<Array<{ stream: Stream; at: number }>> {
    const rows = await this.o
      .db()
      .all<{ game_id: string; env: string; deleted_at: number }>(
        'SELECT game_id, env, deleted_at FROM ingest_forgetting ORDER BY deleted_at',
      )
    return rows.map((r) => ({
      stream: { gameId: r.game_id, env: r.env === EVERY_ENV ? undefined : r.env },
      at: Number(r.deleted_at),
    }))
  }

  private async mark(s: Stream, at: number): Promise<void> {
    this.heard(s, at)
    await this.o
      .db()
      .run(
        'INSERT INTO ingest_forgetting (game_id, env, deleted_at) VALUES (?, ?, ?) ON CONFLICT (game_id, env) DO NOTHING',
        [s.gameId, s.env ?? EVERY_ENV, at],
      )
  }

  /** One stream's forgetting; one at a time per stream in this process. */
  private forget(s: Stream, drain: boolean, signal?: AbortSignal): Promise<void> {
    const key = keyOf(s.gameId, s.env)
    let run = this.running.get(key)
    if (!run) {
      run = this.slices(s, drain, signal)
        .catch((e) => {
          if (!(e instanceof Stopped))
            this.o.log.error('forgetting a deleted stream failed', {
              gameId: s.gameId,
              env: s.env ?? '(every one)',
              error: String(e),
            })
        })
        .finally(() => this.running.delete(key))
      this.running.set(key, run)
    }
    return run
  }

  private async slices(s: Stream, drain: boolean, signal?: AbortSignal): Promise<void> {
    const db = this.o.db()
    const pause = this.pause(signal)
    // What this process acknowledged before the deletion is stored first: the walk then meets it.
    await this.o.idle()
    let n = await forgetRaw(db, s, pause)
    // A batch a consumer read before the rows were withheld is written before its results go.
    if (drain) await this.o.drain().catch(() => undefined)
    for (const f of this.o.forgetters) {
      n += await forgetTables(db, f.tables, s, pause)
      f.after?.(s)
    }
    await db.run('DELETE FROM ingest_forgetting WHERE game_id = ? AND env = ?', [
      s.gameId,
      s.env ?? EVERY_ENV,
    ])
    this.o.log.info('deleted stream forgotten', { gameId: s.gameId, env: s.env ?? '(every one)', rows: n })
  }
}

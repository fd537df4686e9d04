import { expect, test } from 'bun:test'
import { migrate } from '../../core/db'
import { heldReads } from '../../test/held-reads'
import { type Engine, forEachEngine, rawDb } from '../../test/helpers'
import rosters from './index'
import { rosterStore } from './store'

// A sync reads the store while requests go on (on PostgreSQL its reads wait on the network). A
// roster this instance wrote meanwhile is not in what it read: installing that read lost the write
// (its on-call periods silenced nothing) until the next sync.

const shift = { start: '2031-05-06T08:00:00.000Z', end: '2031-05-06T16:00:00.000Z' }
const during = Date.parse('2031-05-06T12:00:00.000Z')

/** This instance's store, whose reads of the rosters can be held, and another instance's. */
async function withStores(
  engine: Engine,
  run: (o: {
    mine: ReturnType<typeof rosterStore>
    other: ReturnType<typeof rosterStore>
    held: ReturnType<typeof heldReads>
  }) => Promise<void>,
) {
  const { db, done } = await rawDb(engine)
  try {
    await migrate(db, [{ plugin: 'rosters', migrations: rosters.migrations ?? [] }])
    const held = heldReads(db, 'all', (sql) => sql.includes('FROM rosters'))
    await run({ mine: rosterStore(held.db), other: rosterStore(db), held })
  } finally {
    await done()
  }
}

forEachEngine((engine) => {
  test("a sync that read the store before this instance's own roster writes keeps them", () =>
    withStores(engine, async ({ mine, other, held }) => {
      await mine.create('first', 'day shift', [shift])
      await mine.sync()
      // Another instance writes a roster: the next sync reads the store again.
      await other.create('remote', 'night shift', [shift])
      const release = held.hold()
      const syncing = mine.sync()
      await held.reached(2)
      // Meanwhile this instance creates one roster and removes another.
      await mine.create('local', 'weekend', [shift])
      await mine.remove('first')
      expect(mine.covers('local', during)).toBe(true)
      release()
      await syncing
      expect(mine.covers('local', during)).toBe(true)
      expect(mine.covers('remote', during)).toBe(true)
      expect(mine.covers('first', during)).toBe(false)
      // The read that met the writes was read again.
      expect(held.reads()).toBe(3)
    }))

  test('a sync that began first finishes first: an older copy never replaces a newer one', () =>
    withStores(engine, async ({ mine, other, held }) => {
      await mine.sync()
      await other.create('early', 'day shift', [shift])
      // The timer's sync reads the store, and is held before it installs what it read.
      const release = held.hold()
      const first = mine.sync()
      await held.reached(2)
      // Another instance writes again, and its notice starts a second sync.
      await other.create('late', 'night shift', [shift])
      const second = mine.sync()
      await Promise.race([second, Bun.sleep(300)])
      release()
      await Promise.all([first, second])
      expect(mine.covers('early', during)).toBe(true)
      expect(mine.covers('late', during)).toBe(true)
    }))
})

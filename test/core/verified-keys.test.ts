import { afterAll, beforeAll, expect, test } from 'bun:test'
import { scopedTokenStore } from '../../core/auth/app-tokens'
import { sdkKeyStore } from '../../core/auth/sdk-keys'
import type { Db } from '../../core/db'
import { heldReads } from '../held-reads'
import { type TestApp, forEachEngine, makeApp } from '../helpers'

// A key's verification reads the store (on PostgreSQL it waits on the network while other
// requests run). A revocation that lands meanwhile clears the verified keys, and the read that
// began before it must not put the key back: it kept the revoked key working on this instance
// until the next sync.

forEachEngine((engine) => {
  let a: TestApp
  beforeAll(async () => {
    a = await makeApp(engine)
  })
  afterAll(() => a.stop())

  const cases = [
    ['an SDK key', (db: Db) => sdkKeyStore(db), async (db: Db) => sdkKeyStore(db).create({ name: 'raced' })],
    [
      'a server key',
      (db: Db) => scopedTokenStore(db, 'serverKey'),
      async (db: Db) => {
        const t = await scopedTokenStore(db, 'serverKey').create('raced', ['query'], 'test')
        return { id: t.id, key: t.token }
      },
    ],
  ] as const

  for (const [what, open, make] of cases)
    test(`${what} revoked while its verification read the store is refused from then on`, async () => {
      // The app's store, whose reads of a key by its hash can be held.
      const held = heldReads(a.db, 'get', (sql) => /WHERE (key|token)_hash = \?/.test(sql))
      const keys = open(held.db)
      const made = await make(a.db)
      const release = held.hold()
      const verifying = keys.verify(made.key)
      await held.reached(1)
      // The read above found the key live; it is revoked before that answer is used.
      await keys.revoke(made.id)
      release()
      expect(await verifying).toBeUndefined()
      expect(await keys.verify(made.key)).toBeUndefined()
      // The read that met the revocation was read again.
      expect(held.reads()).toBe(2)
    })
})

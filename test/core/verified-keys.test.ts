import { afterAll, beforeAll, expect, test } from 'bun:test'
import { scopedTokenStore } from '../../core/auth/app-tokens'
import { sdkKeyStore } from '../../core/auth/sdk-keys'
import type { Db } from '../../core/db'
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

  /** The app's store, with every read of a key by its hash held while `hold` is set. */
  const heldStore = () => {
    const state = { hold: undefined as Promise<void> | undefined, reads: 0 }
    const db = new Proxy(a.db, {
      get(target, key) {
        if (key === 'get')
          return async (sql: string, params?: unknown[]) => {
            const row = await target.get(sql, params as never)
            if (/WHERE (key|token)_hash = \?/.test(sql)) {
              state.reads++
              await state.hold
            }
            return row
          }
        const v = Reflect.get(target, key)
        return typeof v === 'function' ? v.bind(target) : v
      },
    }) as Db
    return { db, state }
  }

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
      const { db, state } = heldStore()
      const keys = open(db)
      const made = await make(a.db)
      let release = () => {}
      state.hold = new Promise((r) => {
        release = r
      })
      const verifying = keys.verify(made.key)
      while (state.reads < 1) await Bun.sleep(1)
      // The read above found the key live; it is revoked before that answer is used.
      state.hold = undefined
      await keys.revoke(made.id)
      release()
      expect(await verifying).toBeUndefined()
      expect(await keys.verify(made.key)).toBeUndefined()
      // The read that met the revocation was read again.
      expect(state.reads).toBe(2)
    })
})

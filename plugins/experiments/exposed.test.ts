import { expect, test } from 'bun:test'
import { Lru } from './exposed'

test('the LRU keeps at most its capacity, forgetting the entry used longest ago', () => {
  const lru = new Lru<string, boolean>(3)
  for (const k of ['a', 'b', 'c']) lru.set(k, true)
  expect(lru.get('a')).toBe(true)
  lru.set('d', false)
  expect(lru.size).toBe(3)
  expect(lru.get('b')).toBeUndefined()
  expect([lru.get('a'), lru.get('c'), lru.get('d')]).toEqual([true, true, false])
  for (let i = 0; i < 1000; i++) lru.set(`u${i}`, true)
  expect(lru.size).toBe(3)
})

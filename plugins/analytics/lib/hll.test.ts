import { describe, expect, test } from 'bun:test'
import { HyperLogLog } from './hll'

describe('HyperLogLog', () => {
  // Standard error 1.04 / sqrt(4096) = 1.63%; three standard errors bound nearly every run.
  for (const n of [10, 1_000, 50_000, 300_000]) {
    test(`estimates ${n} distinct values within 5%`, () => {
      const h = new HyperLogLog()
      for (let i = 0; i < n; i++) h.add(`user-${i}`)
      for (let i = 0; i < n; i += 3) h.add(`user-${i}`) // repeats change nothing
      expect(Math.abs(h.count() - n) / n).toBeLessThan(n < 100 ? 0.01 : 0.05)
    })
  }

  test('add tells whether a register changed', () => {
    const h = new HyperLogLog()
    expect(h.add('someone')).toBe(true)
    expect(h.add('someone')).toBe(false)
    const before = h.serialize()
    for (let i = 0; i < 5; i++) h.add('someone')
    expect(h.serialize()).toBe(before)
  })

  test('serializes sparse and dense and merges', () => {
    const a = new HyperLogLog()
    const b = new HyperLogLog()
    for (let i = 0; i < 100; i++) a.add(`a${i}`)
    for (let i = 0; i < 20_000; i++) b.add(`b${i}`)
    expect(a.serialize().startsWith('s:')).toBe(true)
    expect(b.serialize().startsWith('d:')).toBe(true)
    expect(HyperLogLog.parse(a.serialize()).registers).toEqual(a.registers)
    expect(HyperLogLog.parse(b.serialize()).registers).toEqual(b.registers)
    a.merge(b)
    expect(Math.abs(a.count() - 20_100) / 20_100).toBeLessThan(0.05)
    expect(new HyperLogLog().count()).toBe(0)
  })
})

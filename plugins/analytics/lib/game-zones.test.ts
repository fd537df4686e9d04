import { expect, test } from 'bun:test'
import { GameZones } from './game-zones'

// The consumers bucket days by each game's time zone, looked up once. A lookup under way when the
// game's zone changed (its notice: `forget`) must not keep the old zone, and a change whose notice
// was lost is found by `changed` (the analytics sync job).

test('a zone looked up before its game changed is looked up again; a change without its notice is found', async () => {
  const zones: Record<string, string> = { reef: 'Pacific/Fiji', dune: 'Africa/Cairo' }
  let hold: Promise<void> | undefined
  let lookups = 0
  const z = new GameZones(async (g) => {
    const tz = zones[g]
    lookups++
    await hold
    return tz
  })
  let release = () => {}
  hold = new Promise((r) => {
    release = r
  })
  const loading = z.load(['reef'])
  while (lookups < 1) await Bun.sleep(1)
  hold = undefined
  // The game moves to another zone while the old one is being read.
  zones.reef = 'Asia/Kolkata'
  z.forget('reef')
  release()
  await loading
  expect(z.get('reef')?.name).toBe('Asia/Kolkata')
  expect(lookups).toBe(2)
  // Changed where this instance did not hear of it: found, the others left alone.
  await z.load(['dune'])
  expect(await z.changed()).toEqual([])
  zones.dune = 'Europe/Lisbon'
  expect(await z.changed()).toEqual(['dune'])
})

/**
 * Preloaded into a measured server (`bun --preload scripts/bench/loop-holds.ts core/main.ts`):
 * appends every stretch the event loop was held longer than `LOOP_HOLDS_MIN_MS` (20 ms) to
 * `LOOP_HOLDS_FILE`, one line each: the epoch ms it ended and how long it lasted (ms). A 1 ms
 * timer notes each turn; the gap between two is how long nothing else could run.
 */
import { appendFileSync } from 'node:fs'

const file = process.env.LOOP_HOLDS_FILE
const min = Number(process.env.LOOP_HOLDS_MIN_MS ?? 20)
if (file) {
  let last = performance.now()
  setInterval(() => {
    const now = performance.now()
    if (now - last > min) appendFileSync(file, `${Date.now()} ${(now - last).toFixed(1)}\n`)
    last = now
  }, 1).unref()
}

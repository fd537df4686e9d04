/**
 * Child process for the flush-on-exit test in client.test.ts: queues events with no interval
 * and no flush() call, then lets the process end on its own. Only the exit hook can send them.
 * Env: LIVEOPS_URL (the test's server), LIVEOPS_EVENTS (how many to track).
 */
import { LiveopsClient } from './client'

const client = new LiveopsClient({
  endpoint: process.env.LIVEOPS_URL ?? '',
  gameId: 'g-exit',
  env: 'prod',
  secret: 'exit-secret',
  flushIntervalMs: 0,
  maxRetries: 0,
  onError: (e) => console.error(e.message),
})
const n = Number(process.env.LIVEOPS_EVENTS ?? 3)
for (let i = 0; i < n; i++) client.track('exit-event', { i })
process.on('exit', () => console.log(JSON.stringify({ acknowledged: client.acknowledged })))

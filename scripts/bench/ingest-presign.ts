/**
 * The pre-signed requests of `ingest.ts --mode=single-wrk|batch-wrk` and the Lua script wrk
 * replays them with: each request is signed once here (unique nonce) and read back by wrk, so
 * the load generator costs little CPU in the measured window.
 */
import { join } from 'node:path'
import { eventsBody, shapes } from './events'
import { paymentsBody, sign } from './ingest-load'

const DAY = 86_400_000

export interface Presigned {
  /** How many requests were signed, warm-up and window together. */
  n: number
  /** The warm-up's requests, then the measured window's. */
  files: [string, string]
}

export async function presign(o: {
  dir: string
  gameId: string
  /** Events per request (1: one-event requests at the moment they were signed). */
  size: number
  seconds: number
  warmup: number
  eventIds: boolean
  /** `--requests`: how many to sign ('' for enough for the rate the window could reach). */
  requests: string
  /**
   * `--times=live`: every event at the moment its request was signed, as a live game sends them
   * (a batch's events then fall in a minute or two), instead of 30 days replayed over the run
   * (a 20,000-row batch then spans two hours of per-minute sketches).
   */
  live?: boolean
}): Promise<Presigned> {
  const { dir, gameId, size, seconds, warmup, eventIds } = o
  // Enough distinct requests for the rate the window could reach: a replayed nonce is a 429
  // (counted in non2xx, never in the rates). 2,000 batches a second ran out in a fast hour.
  const perSecond = size > 1 ? 3_000 : 60_000
  const n = Number(o.requests || String((seconds + warmup) * perSecond))
  // Warm-up and measured window replay their own requests (each nonce is sent once), written
  // as they are signed: all of them at once would pass the longest string there can be.
  const cut = Math.min(n - 1, warmup * perSecond)
  const files: [string, string] = [join(dir, 'warmup.txt'), join(dir, 'signed.txt')]
  const sinks = files.map((f) => Bun.file(f).writer())
  const pool = shapes(gameId)
  const simStart = Date.now() - 30 * DAY
  const seq = { order: 0 }
  for (let i = 0; i < n; i++) {
    // 30 days pass over the requests a run at 150,000 events/s sends. Any beyond follow at that
    // pace (1,500 requests a second) up to the moment they were signed, as a live game's would.
    // They all carried that one moment before session 17: a faster run's last ~10 s then had
    // about ten commits in five seconds spend 60 ms in COMMIT, against one otherwise.
    const paced = (seconds + warmup) * 1_500
    const at =
      size > 1 && !o.live
        ? i < paced
          ? simStart + (i / paced) * 30 * DAY
          : simStart + 30 * DAY - (n - i) / 1.5
        : Date.now()
    // One batch in 100 carries payments (as many as a batch of events, so every request
    // acknowledges the same number of events and the count check stays exact).
    const payments = size > 1 && i % 100 === 99
    const body = payments ? paymentsBody(gameId, size, at, seq) : eventsBody(pool, size, at, eventIds)
    const h = sign(body)
    const path = payments ? '/api/ingest/payments' : '/api/ingest/events'
    sinks[i < cut ? 0 : 1]!.write(
      `${path}\t${h['x-timestamp']}\t${h['x-nonce']}\t${h['x-signature']}\t${body}\n`,
    )
  }
  for (const sink of sinks) await sink.end()
  // The request files (2.5-3.6 GB) go to disk now, not during the measured window: the kernel
  // wrote them back 30 s after they were written, and commits waited 100 ms to 1 s in COMMIT
  // while it did (session 17, docs/performance.md).
  Bun.spawnSync(['sync'])
  return { n, files }
}

/** A wrk Lua script replaying `file`'s requests, each of `threads` threads its share. */
export async function replayScript(
  dir: string,
  name: string,
  file: string,
  threads: number,
): Promise<string> {
  const script = join(dir, `${name}.lua`)
  await Bun.write(
    script,
    `
local threads = {}
local counter = 0
function setup(thread) thread:set("id", counter); counter = counter + 1; table.insert(threads, thread) end
function init(args)
  reqs = {}
  local i = 0
  for line in io.lines("${file}") do
    if i % ${threads} == id then
      local path, ts, nonce, sig, body = line:match("([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)")
      table.insert(reqs, wrk.format("POST", path, { ["Content-Type"] = "application/json", ["X-Timestamp"] = ts, ["X-Nonce"] = nonce, ["X-Signature"] = sig }, body))
    end
    i = i + 1
  end
  k = 0
end
function request() k = k + 1; if k > #reqs then k = 1 end; return reqs[k] end
`,
  )
  return script
}

import { join } from 'node:path'
import { SECRET } from './ingest-load'
import { type CpuResult, bareEnv, engineProcess, freshPgDatabase, wrk, wrkCpu } from './lib'

/**
 * A bare Bun server doing the essential work of signed batch ingestion (see the batch-wrk
 * mode), in its own process, driven by wrk with the same scripts and connections as liveops.
 * On SQLite it inserts into one table of a WAL file, one transaction per request; on PostgreSQL
 * into one table of its own database, one multi-row INSERT per request (postgres.js' `sql(rows)`
 * helper, autocommit, a pool as large as liveops'), the way a plain service would.
 */
export async function bareIngest(o: {
  engine: string
  dir: string
  pgPool: number
  connections: number
  seconds: number
  files: string[]
  scriptFor: (name: string, file: string) => Promise<string>
  wrkThreads: number
  warmup: number
  /** Called with the bare server's own PostgreSQL database, to be dropped by the caller. */
  madeDb?: (url: string) => void
}): Promise<CpuResult> {
  const { engine, dir, pgPool, connections, seconds, files, scriptFor, wrkThreads, warmup } = o
  let bareUrl = ''
  const file = join(dir, 'bare-ingest.ts')
  if (engine === 'postgres') {
    bareUrl = await freshPgDatabase('liveops_bench_bare')
    o.madeDb?.(bareUrl)
  }
  const row =
    'e.game_id ?? null, e.env ?? null, e.event ?? e.event_type ?? null, e.uid ?? e.user_id ?? null, Number(e.ts) || 0, JSON.stringify(e.props ?? e.properties ?? null)'
  const storeCode =
    engine === 'postgres'
      ? `import postgres from 'postgres'
const sql = postgres(${JSON.stringify(bareUrl)}, { max: ${pgPool}, onnotice: () => undefined })
await sql\`CREATE TABLE ev (id BIGSERIAL PRIMARY KEY, game_id TEXT, env TEXT, event TEXT, user_id TEXT, ts BIGINT, props JSONB)\`
const store = (rows) => sql\`INSERT INTO ev \${sql(rows.map((e) => { const [game_id, env, event, user_id, ts, props] = [${row}]; return { game_id, env, event, user_id, ts, props } }))}\`
`
      : `import { Database } from 'bun:sqlite'
const db = new Database(${JSON.stringify(join(dir, 'bare.sqlite'))})
db.exec('PRAGMA journal_mode = WAL')
db.exec('PRAGMA synchronous = NORMAL')
db.exec('CREATE TABLE ev (id INTEGER PRIMARY KEY, game_id TEXT, env TEXT, event TEXT, user_id TEXT, ts INTEGER, props TEXT)')
const ins = db.prepare('INSERT INTO ev (game_id, env, event, user_id, ts, props) VALUES (?, ?, ?, ?, ?, ?)')
const store = db.transaction((rows) => {
  for (const e of rows) ins.run(${row})
})
`
  await Bun.write(
    file,
    `${storeCode}import { timingSafeEqual } from 'node:crypto'
const verified = (r, body) => {
  const digest = new Bun.CryptoHasher('sha256').update(body).digest('hex')
  const want = new Bun.CryptoHasher('sha256', ${JSON.stringify(SECRET)}).update(r.headers.get('x-timestamp') + '\\n' + r.headers.get('x-nonce') + '\\n' + digest).digest()
  const got = Buffer.from(r.headers.get('x-signature') ?? '', 'base64')
  return got.length === want.length && timingSafeEqual(got, want)
}
const ingest = async (r) => {
  const body = await r.text()
  if (!verified(r, body)) return new Response('bad signature', { status: 401 })
  const rows = JSON.parse(body)
  await store(rows)
  return Response.json({ accepted: rows.length })
}
const s = Bun.serve({ port: 0, hostname: '127.0.0.1', routes: { '/api/ingest/events': { POST: ingest }, '/api/ingest/payments': { POST: ingest } } })
console.log('ready ' + s.port)
`,
  )
  const proc = Bun.spawn([process.execPath, file], { stdout: 'pipe', stderr: 'inherit', env: bareEnv() })
  const reader = proc.stdout.getReader()
  let out = ''
  while (!/ready \d+/.test(out)) {
    const { done, value } = await reader.read()
    if (done) throw new Error(`bare ingest server did not start: ${out}`)
    out += new TextDecoder().decode(value)
  }
  const url = `http://127.0.0.1:${out.match(/ready (\d+)/)![1]}/api/ingest/events`
  try {
    if (warmup)
      wrk(url, {
        connections,
        seconds: warmup,
        threads: wrkThreads,
        script: await scriptFor('bare-warmup', files[0]),
      })
    return wrkCpu(
      proc.pid,
      url,
      { connections, seconds, threads: wrkThreads, script: await scriptFor('bare', files[1]) },
      engineProcess(engine),
    )
  } finally {
    proc.kill()
  }
}

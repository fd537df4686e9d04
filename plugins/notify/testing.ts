import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
/**
 * Test fakes at the process edges (an HTTP sink, an SMTP sink) and a restartable app on a store
 * the test owns, for the durability tests. Used by tests only.
 */
import type { Socket } from 'bun'
import postgres from 'postgres'
import { stringify } from 'yaml'
import { type LiveopsApp, createApp } from '../../core/app'
import { loadConfig } from '../../core/config'
import { createLogger } from '../../core/log'
import { type Engine, PG_URL, TEST_OUTBOUND, freshMysqlDb, hashOnce } from '../../test/helpers'
import { plugins } from '../index'

export interface Hit {
  method: string
  path: string
  headers: Record<string, string>
  body: Record<string, unknown>
}

/** An HTTP endpoint recording every request; `answer` decides each response (default 200). */
export function httpSink(
  answer: (hit: Hit, n: number) => Response | Promise<Response> = () => new Response('ok'),
) {
  const hits: Hit[] = []
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(req) {
      const headers: Record<string, string> = {}
      req.headers.forEach((v, k) => {
        headers[k] = v
      })
      const text = await req.text()
      const hit: Hit = {
        method: req.method,
        path: new URL(req.url).pathname,
        headers,
        body: text ? JSON.parse(text) : {},
      }
      hits.push(hit)
      return answer(hit, hits.length)
    },
  })
  return { hits, url: `http://127.0.0.1:${server.port}/hook`, stop: () => server.stop(true) }
}

export interface Mail {
  from: string
  to: string[]
  data: string
}

/** Speaks just enough SMTP (EHLO, AUTH PLAIN/LOGIN, MAIL, RCPT, DATA, RSET, NOOP, QUIT) to record messages. */
export function smtpSink(opts: { rejectRcpt?: number } = {}) {
  const mails: Mail[] = []
  /** The SASL mechanism of every AUTH command, in order. */
  const auths: string[] = []
  type State = { buf: string; from: string; to: string[]; data?: string[]; authStep?: number }
  const server = Bun.listen<State>({
    hostname: '127.0.0.1',
    port: 0,
    socket: {
      open(s) {
        s.data = { buf: '', from: '', to: [] }
        s.write('220 sink ESMTP\r\n')
      },
      data(s, chunk) {
        s.data.buf += chunk.toString()
        let i = s.data.buf.indexOf('\r\n')
        while (i >= 0) {
          const line = s.data.buf.slice(0, i)
          s.data.buf = s.data.buf.slice(i + 2)
          handle(s, line)
          i = s.data.buf.indexOf('\r\n')
        }
      },
    },
  })
  function handle(s: Socket<State>, line: string) {
    const st = s.data
    if (st.data) {
      if (line === '.') {
        mails.push({ from: st.from, to: st.to, data: st.data.join('\n') })
        st.data = undefined
        st.to = []
        s.write('250 queued\r\n')
      } else st.data.push(line.startsWith('..') ? line.slice(1) : line)
      return
    }
    if (st.authStep) {
      st.authStep = st.authStep === 1 ? 2 : 0
      s.write(st.authStep ? '334 UGFzc3dvcmQ6\r\n' : '235 ok\r\n')
      return
    }
    const cmd = line.slice(0, 4).toUpperCase()
    if (cmd === 'EHLO') s.write('250-sink\r\n250-AUTH PLAIN LOGIN\r\n250 8BITMIME\r\n')
    else if (cmd === 'HELO') s.write('250 sink\r\n')
    else if (cmd === 'AUTH') {
      auths.push(line.split(/\s+/)[1]?.toUpperCase() ?? '')
      if (/^AUTH LOGIN\s*$/i.test(line)) {
        st.authStep = 1
        s.write('334 VXNlcm5hbWU6\r\n')
      } else s.write('235 ok\r\n')
    } else if (cmd === 'MAIL') {
      st.from = line
        .replace(/^MAIL FROM:\s*/i, '')
        .replace(/[<>]/g, '')
        .split(' ')[0]
      s.write('250 ok\r\n')
    } else if (cmd === 'RCPT') {
      if (opts.rejectRcpt) return void s.write(`${opts.rejectRcpt} mailbox unavailable\r\n`)
      st.to.push(
        line
          .replace(/^RCPT TO:\s*/i, '')
          .replace(/[<>]/g, '')
          .split(' ')[0],
      )
      s.write('250 ok\r\n')
    } else if (cmd === 'DATA') {
      st.data = []
      s.write('354 go ahead\r\n')
    } else if (cmd === 'QUIT') {
      s.write('221 bye\r\n')
      s.end()
    } else s.write('250 ok\r\n')
  }
  return { mails, auths, port: server.port, stop: () => server.stop(true) }
}

/** A store the test owns (a SQLite file or a PostgreSQL schema), so an app can stop and start again on it. */
export async function ownStore(engine: Engine) {
  const dataDir = mkdtempSync(join(tmpdir(), 'liveops-notify-'))
  const schema = engine === 'postgres' ? `t_${crypto.randomUUID().replace(/-/g, '').slice(0, 16)}` : undefined
  if (schema) {
    const sql = postgres(PG_URL, { max: 1, onnotice: () => undefined })
    await sql.unsafe(`CREATE SCHEMA ${schema}`)
    await sql.end()
  }
  // MySQL: a database of its own (test/mysql-db.ts).
  const my = engine === 'mysql' ? await freshMysqlDb() : undefined
  return {
    dataDir,
    schema,
    url: my ? my.url : schema ? PG_URL : join(dataDir, 'test.sqlite'),
    async drop() {
      await my?.drop()
      if (schema) {
        const sql = postgres(PG_URL, { max: 1, onnotice: () => undefined })
        await sql.unsafe(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
        await sql.end()
      }
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}

/** The real app on an owned store, with a tiny JSON request helper. */
export async function appOn(
  store: Awaited<ReturnType<typeof ownStore>>,
  pluginSettings: Record<string, unknown>,
  core: Record<string, unknown> = {},
) {
  const yaml = stringify({
    data_dir: store.dataDir,
    database: { url: store.url, pool: 5 },
    auth: { jwt_secret: 'test-jwt-secret-0001', admin_token: 'test-admin-token' },
    admin: { email: 'admin@localhost', password: 'admin-password' },
    rate_limit: { requests_per_minute: 0, burst: 0 },
    outbound: TEST_OUTBOUND,
    log: { level: 'error' },
    ...core,
    // The notification routes open to anonymous callers, as these tests call them without tokens.
    plugins: {
      ...pluginSettings,
      ...(pluginSettings.notify
        ? { notify: { auth: { enabled: false }, ...(pluginSettings.notify as Record<string, unknown>) } }
        : {}),
    },
  })
  const config = loadConfig(yaml, plugins, {})
  const built: LiveopsApp = await createApp(config, {
    plugins,
    pgSchema: store.schema,
    log: createLogger(config.core.log),
    hashPassword: hashOnce,
  })
  const req = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await built.app.handle(
      new Request(`http://localhost${path}`, {
        method,
        headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      }),
    )
    return {
      status: res.status,
      body: (await res.json()) as {
        code: number
        message: string
        data: Record<string, unknown> & { [k: string]: unknown }
      },
    }
  }
  return { ...built, req }
}

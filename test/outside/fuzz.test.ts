import { afterAll, beforeAll, expect, test } from 'bun:test'
import Ajv2020 from 'ajv/dist/2020'
import { plugins } from '../../plugins'
import { type TestApp, forEachEngine, makeApp } from '../helpers'
import { Generator, type Json, rng } from './fuzz-gen'

/*
 * Issue 15 point 13: every documented operation driven with generated valid and invalid inputs
 * from the OpenAPI description, against the real app. A finding is any 5xx, any status the
 * operation does not document, any JSON answer its documented schema refuses, and any invalid
 * input answered with a 2xx. Seeded: FUZZ_SEED=<n> replays a run; FUZZ_ROUNDS scales it.
 */
const SEED = Number(process.env.FUZZ_SEED ?? 15_2026)
const ROUNDS = Number(process.env.FUZZ_ROUNDS ?? 1)
const METHODS = ['get', 'post', 'put', 'delete', 'patch']
const ADMIN = { 'x-admin-token': 'test-admin-token' }

type Param = { name: string; in: string; required?: boolean; schema?: Json }
type Op = {
  parameters?: Param[]
  requestBody?: { content?: Record<string, { schema?: Json }> }
  responses: Record<string, { content?: Record<string, { schema?: Json }> }>
  security?: Array<Record<string, unknown>>
}

/** `#/components/schemas/X` -> `api#/$defs/X`, everywhere, so Ajv resolves the document's models. */
function rewriteRefs(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(rewriteRefs)
  if (!v || typeof v !== 'object') return v
  return Object.fromEntries(
    Object.entries(v).map(([k, x]) => [
      k,
      k === '$ref' && typeof x === 'string'
        ? x.replace('#/components/schemas/', 'api#/$defs/')
        : rewriteRefs(x),
    ]),
  )
}

forEachEngine((engine) => {
  let a: TestApp
  let doc: { paths: Record<string, Record<string, Op>>; components: { schemas: Record<string, Json> } }
  const known: Record<string, string[]> = {
    environmentName: ['dev', 'staging', 'prod'],
    environment: ['dev', 'prod'],
  }
  let apiKey = ''

  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        ...Object.fromEntries(Object.keys(plugins).map((n) => [n, {}])),
        ingest: { signing_secret: 'fuzz-signing-secret-8812' },
        notify: { channels: { fuzzlog: { type: 'log' } } },
        // Unconfigured, the card callback answers 501 to everything (issue 34 point 4).
        rules: { chatcard: { verification_token: 'fuzz-card-token' } },
      },
    })
    doc = (await a.req('GET', '/v3/api-docs')).body
    // Real resources, so generated path parameters reach existing rows as well as missing ones.
    const g = await a.req('POST', '/api/games', {
      headers: ADMIN,
      body: {
        name: 'Fuzz',
        genre: 'ACTION',
        platforms: ['WEB'],
        timezone: 'Europe/Oslo',
        defaultCurrency: 'NOK',
      },
    })
    known.gameId = [g.body.id]
    const k = await a.req('POST', '/api/api-keys', {
      headers: ADMIN,
      body: { name: 'fuzz', gameId: g.body.id, environment: 'dev' },
    })
    apiKey = k.body.key
    const e = await a.req('POST', '/api/experiments', {
      headers: ADMIN,
      body: {
        gameId: g.body.id,
        environment: 'dev',
        name: 'fuzz-exp',
        config: {
          variants: [
            { name: 'a', weight: 50 },
            { name: 'b', weight: 50 },
          ],
        },
      },
    })
    const t = await a.req('POST', '/api/v1/templates/create', {
      headers: ADMIN,
      body: { id: 'fuzz-tpl', name: 'Fuzz', title: 'Hello {{name}}' },
    })
    known.id = [e.body.id, 'fuzz-tpl'].filter(Boolean)
    known.name = ['fuzzlog']
    known.userId = ['user-1']
    expect(t.status).toBe(200)
  })
  afterAll(() => a.stop())

  test(`every documented operation, generated valid and invalid inputs (seed ${SEED})`, async () => {
    const r = rng(SEED + (engine === 'postgres' ? 1 : 0))
    const gen = new Generator(doc.components.schemas, r, known)
    const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: false })
    ajv.addSchema({ $id: 'api', $defs: rewriteRefs(doc.components.schemas) as Json })
    const validators = new Map<string, ReturnType<typeof ajv.compile>>()
    const findings = new Map<string, string>()
    const find = (key: string, what: string) => {
      if (!findings.has(key)) findings.set(key, what)
    }

    const ops = Object.entries(doc.paths)
      .flatMap(([path, o]) =>
        Object.entries(o)
          .filter(([m]) => METHODS.includes(m))
          .map(([m, op]) => ({ path, method: m, op })),
      )
      // Deletes last, so the fixtures live through everything else.
      .sort((x, y) => Number(x.method === 'delete') - Number(y.method === 'delete'))
    expect(ops.length).toBeGreaterThan(60)
    let requests = 0

    for (let round = 0; round < ROUNDS; round++)
      for (const { path, method, op } of ops) {
        const params = op.parameters ?? []
        const bodySchema = op.requestBody?.content?.['application/json']?.schema
        const schemes = (op.security ?? []).flatMap((s) => Object.keys(s))
        const credentials: Record<string, string> = schemes.includes('adminToken')
          ? ADMIN
          : schemes.includes('apiKey')
            ? { 'x-api-key': apiKey }
            : {}
        const cases: Array<{ invalid?: string; anonymous?: boolean }> = [
          ...Array.from({ length: 6 }, () => ({})),
          ...Array.from({ length: 4 }, () => ({ invalid: 'pending' })),
          ...(schemes.length ? [{ anonymous: true }] : []),
        ]
        for (const c of cases) {
          // An anonymous caller asks for a path that exists: 401 must come before any lookup.
          let url = path.replace(/\{([^}]+)\}/g, (_, name: string) => {
            const p = params.find((x) => x.in === 'path' && x.name === name)
            if (c.anonymous) return known[name]?.[0] ?? 'x'
            // A segment is never empty, '.' or '..': URLs resolve those to another path.
            const v = String(gen.valid(p?.schema, name))
            return v === '' || v === '.' || v === '..' ? 'x' : encodeURIComponent(v)
          })
          const query = new URLSearchParams()
          for (const p of params.filter((x) => x.in === 'query'))
            if (p.required || r.chance(0.4)) query.set(p.name, String(gen.valid(p.schema, p.name)))
          let body: unknown = bodySchema ? gen.valid(bodySchema) : undefined
          let why: string | undefined
          if (c.invalid) {
            const queryable = params
              .filter((x) => x.in === 'query')
              .filter((p) => {
                const s = gen.resolve(p.schema)
                return (
                  Array.isArray(s.enum) || s.type === 'integer' || s.type === 'number' || s.type === 'boolean'
                )
              })
            if (bodySchema && (!queryable.length || r.chance(0.7))) {
              const bad = gen.invalid(bodySchema)
              if (bad) {
                body = bad.value
                why = `body ${bad.why}`
              }
            } else if (queryable.length) {
              const p = r.pick(queryable)
              const s = gen.resolve(p.schema)
              query.set(p.name, Array.isArray(s.enum) ? '__nope__' : s.type === 'boolean' ? 'maybe' : 'NaNx')
              why = `query.${p.name} invalid`
            }
            if (!why) continue
          }
          if (query.size) url += `?${query}`
          const headers: Record<string, string> = c.anonymous ? {} : { ...credentials }
          if (body !== undefined) headers['content-type'] = 'application/json'
          const res = await a.req(method.toUpperCase(), url, {
            headers,
            raw: body !== undefined ? JSON.stringify(body) : undefined,
          })
          requests++
          const label = `${method.toUpperCase()} ${path}`
          const sample = `${method.toUpperCase()} ${url} ${JSON.stringify(body)?.slice(0, 200) ?? ''}`
          if (res.status >= 500)
            find(`${label} 5xx`, `${res.status} for ${sample}: ${JSON.stringify(res.body).slice(0, 200)}`)
          // 429: the refresh routes throttle failed attempts per address before anything else.
          if (c.anonymous && res.status !== 401 && res.status !== 429)
            find(`${label} anon`, `${res.status} without credentials`)
          if (why && res.status < 300)
            find(`${label} accepted`, `${res.status} for invalid input (${why}): ${sample}`)
          const documented = op.responses[String(res.status)] ?? op.responses.default
          if (!documented) {
            find(
              `${label} ${res.status}`,
              `undocumented status ${res.status} for ${sample}: ${JSON.stringify(res.body).slice(0, 200)}`,
            )
            continue
          }
          const schema = documented.content?.['application/json']?.schema
          if (!schema || !(res.headers.get('content-type') ?? '').includes('json')) continue
          const key = `${label} ${res.status}`
          let validate = validators.get(key)
          if (!validate) {
            validate = ajv.compile(rewriteRefs(schema) as Json)
            validators.set(key, validate)
          }
          if (!validate(res.body))
            find(
              `${key} schema`,
              `answer violates its documented schema: ${ajv.errorsText(validate.errors)} for ${sample}: ${JSON.stringify(res.body).slice(0, 300)}`,
            )
        }
      }
    if (findings.size)
      console.error(`fuzz seed ${SEED} (${engine}) findings:\n${[...findings.values()].join('\n')}`)
    expect([...findings.entries()].map(([k, v]) => `${k}: ${v}`)).toEqual([])
    expect(requests).toBeGreaterThan(600)
  }, 90_000)
})

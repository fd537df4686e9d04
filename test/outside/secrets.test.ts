import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { httpSink } from '../../plugins/notify/testing'
import { type TestApp, forEachEngine, makeApp, until } from '../helpers'

/*
 * Issue 15 point 1, the attacks as they were reported: the server's own secrets read back through
 * `$VAR` expansion of API input and its error messages, and header/URL secrets read back in clear.
 */
const SERVER_SECRETS = {
  JWT_SECRET: 'jwt-secret-value-Qx81',
  ADMIN_PASSWORD: 'admin-password-value-Zr27',
  INGEST_SIGNING_SECRET: 'ingest-signing-value-Mm54',
}
const API_KEY = 'key-value-for-the-hook-7781'
const SIGNING = 'signing-value-for-the-hook-3319'
const URL_TOKEN = 'query-token-value-4406'
const URL_PASSWORD = 'url-password-value-5512'

const saved: Record<string, string | undefined> = {}
beforeAll(() => {
  for (const [k, v] of Object.entries({
    ...SERVER_SECRETS,
    LIVEOPS_T_ALLOWED_HOOK: 'placeholder',
    LIVEOPS_T_YAML_HOOK: 'placeholder',
    LIVEOPS_T_NOT_A_URL: 'not-a-url-value-0042',
  })) {
    saved[k] = process.env[k]
    process.env[k] = v
  }
})
afterAll(() => {
  for (const [k, v] of Object.entries(saved))
    if (v === undefined) delete process.env[k]
    else process.env[k] = v
})

const leaks = (body: unknown, values: string[]) => {
  const text = JSON.stringify(body)
  return values.filter((v) => text.includes(v))
}

forEachEngine((engine) => {
  const sink = httpSink()
  let a: TestApp
  beforeAll(async () => {
    process.env.LIVEOPS_T_ALLOWED_HOOK = `${sink.url}/allowed`
    process.env.LIVEOPS_T_YAML_HOOK = `${sink.url}/yaml`
    a = await makeApp(engine, {
      plugins: {
        'webhook-provider': {},
        notify: {
          api_env: ['LIVEOPS_T_ALLOWED_HOOK', 'LIVEOPS_T_NOT_A_URL'],
          channels: { fromyaml: { type: 'webhook', url: '$LIVEOPS_T_YAML_HOOK' } },
        },
      },
    })
  })
  afterAll(async () => {
    await a.stop()
    sink.stop()
  })
  const admin = { 'x-admin-token': 'test-admin-token' }

  describe('$VAR in settings sent through the API', () => {
    for (const name of Object.keys(SERVER_SECRETS))
      test(`{"url":"$${name}"} is refused naming the field, and nothing echoes the value`, async () => {
        const r = await a.req('PUT', '/api/v1/config/wh', {
          headers: admin,
          body: { type: 'webhook', config: { url: `$${name}` } },
        })
        expect(r.status).toBe(400)
        expect(r.body.data.field).toBe('body.config.url')
        expect(r.body.message).toContain(`$${name}`)
        expect(leaks(r.body, Object.values(SERVER_SECRETS))).toEqual([])
        expect((await a.req('GET', '/api/v1/config/wh', { headers: admin })).status).toBe(404)
      })

    test('an application token with the config scope is refused the same way', async () => {
      const created = await a.req('POST', '/api/v1/app-tokens', {
        headers: admin,
        body: { name: 'deployer', scopes: ['config'] },
      })
      expect(created.status).toBe(200)
      const r = await a.req('PUT', '/api/v1/config/wh', {
        headers: { 'x-app-token': created.body.data.token },
        body: { type: 'webhook', config: { url: '$JWT_SECRET', method: '$ADMIN_PASSWORD' } },
      })
      expect(r.status).toBe(400)
      expect(leaks(r.body, Object.values(SERVER_SECRETS))).toEqual([])
    })

    test('a variable the operator listed expands; reads show the reference, never the value', async () => {
      const r = await a.req('PUT', '/api/v1/config/allowed', {
        headers: admin,
        body: { type: 'webhook', config: { url: '$LIVEOPS_T_ALLOWED_HOOK' } },
      })
      expect(r.status).toBe(200)
      expect(r.body.data.config.url).toBe('$LIVEOPS_T_ALLOWED_HOOK')
      const n = await a.req('POST', '/api/v1/notify', {
        headers: admin,
        body: { type: 'deploy', title: 'via listed variable', channels: ['allowed'] },
      })
      expect(n.status).toBeLessThan(300)
      expect(await until(() => sink.hits.some((h) => h.path.endsWith('/allowed')))).toBe(true)
    })

    test('a listed variable whose value is no URL: the error does not repeat the value', async () => {
      const r = await a.req('PUT', '/api/v1/config/bad', {
        headers: admin,
        body: { type: 'webhook', config: { url: '$LIVEOPS_T_NOT_A_URL' } },
      })
      expect(r.status).toBe(400)
      expect(leaks(r.body, ['not-a-url-value-0042', '0042'])).toEqual([])
    })

    test('the YAML the operator writes may name any variable; its read shows the reference', async () => {
      const r = await a.req('GET', '/api/v1/config/fromyaml', { headers: admin })
      expect(r.body.data.config.url).toBe('$LIVEOPS_T_YAML_HOOK')
      // GET-modify-PUT keeps the operator's reference for that setting, and only there.
      const back = await a.req('PUT', '/api/v1/config/fromyaml', {
        headers: admin,
        body: { ...r.body.data, config: { ...r.body.data.config, timeout_ms: 2500 } },
      })
      expect(back.status).toBe(200)
      expect(back.body.data.config).toEqual({ url: '$LIVEOPS_T_YAML_HOOK', timeout_ms: 2500 })
      const elsewhere = await a.req('PUT', '/api/v1/config/fromyaml', {
        headers: admin,
        body: { config: { url: '$LIVEOPS_T_YAML_HOOK', method: '$LIVEOPS_T_YAML_HOOK' } },
      })
      expect(elsewhere.status).toBe(400)
      expect(elsewhere.body.data.field).toBe('body.config.method')
      await a.req('POST', '/api/v1/notify', {
        headers: admin,
        body: { type: 'deploy', title: 'via yaml', channels: ['fromyaml'] },
      })
      expect(await until(() => sink.hits.some((h) => h.path.endsWith('/yaml')))).toBe(true)
    })
  })

  describe('header values, URL credentials and query values', () => {
    const config = () => ({
      url: `http://hook-user:${URL_PASSWORD}@${sink.url.replace('http://', '')}/hooked?token=${URL_TOKEN}&team=ops`,
      headers: { 'X-Api-Key': API_KEY, 'X-Signing-Secret': SIGNING },
    })
    const secrets = [API_KEY, SIGNING, URL_TOKEN, URL_PASSWORD]

    test('are masked in the PUT answer and in GET /config for every role that may read it', async () => {
      const put = await a.req('PUT', '/api/v1/config/shaped', {
        headers: admin,
        body: { type: 'webhook', config: config() },
      })
      expect(put.status).toBe(200)
      expect(leaks(put.body, secrets)).toEqual([])
      // Channel settings are read by operators and admins only (docs/security.md).
      expect((await a.req('GET', '/api/v1/config/shaped', { token: await a.token('viewer') })).status).toBe(
        403,
      )
      for (const role of ['operator', 'admin']) {
        const r = await a.req('GET', '/api/v1/config/shaped', { token: await a.token(role) })
        expect(r.status).toBe(200)
        expect(leaks(r.body, secrets)).toEqual([])
        expect(r.body.data.config.headers).toEqual({
          'X-Api-Key': 'set:7781',
          'X-Signing-Secret': 'set:3319',
        })
        const u = new URL(r.body.data.config.url)
        expect(decodeURIComponent(u.password)).toBe('set:5512')
        expect(u.searchParams.get('token')).toBe('set:4406')
        // Chat webhooks carry their token in the path: only its last 4 characters show.
        expect(u.pathname).toBe('/set:oked')
      }
    })

    test('nothing else a viewer may read shows them', async () => {
      const viewer = await a.token('viewer')
      for (const path of [
        '/api/v1/providers',
        '/api/v1/status',
        '/api/v1/logs',
        '/api/v1/workers',
        '/api/v1/queue',
      ]) {
        const r = await a.req('GET', path, { token: viewer })
        expect(leaks(r.body, secrets)).toEqual([])
      }
    })

    test('GET-modify-PUT keeps the stored secrets and changes only what was edited', async () => {
      const read = (await a.req('GET', '/api/v1/config/shaped', { headers: admin })).body.data
      const put = await a.req('PUT', '/api/v1/config/shaped', {
        headers: admin,
        body: { type: read.type, enabled: read.enabled, config: { ...read.config, timeout_ms: 4321 } },
      })
      expect(put.status).toBe(200)
      await a.req('POST', '/api/v1/notify', {
        headers: admin,
        body: { type: 'deploy', title: 'round trip', channels: ['shaped'] },
      })
      expect(await until(() => sink.hits.some((h) => h.path.endsWith('/hooked')))).toBe(true)
      const hit = sink.hits.find((h) => h.path.endsWith('/hooked'))!
      expect(hit.headers['x-api-key']).toBe(API_KEY)
      expect(hit.headers['x-signing-secret']).toBe(SIGNING)
      expect(hit.headers.authorization).toBe(`Basic ${btoa(`hook-user:${URL_PASSWORD}`)}`)
    })
  })
})

import { openapi } from '@elysiajs/openapi'
import { Elysia } from 'elysia'
// The browser bundle is not in the package's exports map, hence the path into node_modules.
// `type: 'file'` makes `bun build --compile` embed it; here it is the file's path.
// @ts-expect-error: the bundle ships no type declarations, and a file import is only a path
import scalarBundle from '../node_modules/@scalar/api-reference/dist/browser/standalone.js' with {
  type: 'file',
}
import scalarPackage from '../node_modules/@scalar/api-reference/package.json'
import { pagePolicy } from './page-policy'

/** The pinned Scalar API Reference (package.json pins it exactly); its version names the asset. */
export const SCALAR_VERSION: string = scalarPackage.version
/** Where `/docs` loads the reference UI from: this server, never a CDN, so it works offline. */
export const SCALAR_ASSET = `/docs/assets/scalar-api-reference-${SCALAR_VERSION}.js`

type ScalarOptions = NonNullable<NonNullable<Parameters<typeof openapi>[0]>['scalar']>

/**
 * What `@elysiajs/openapi` puts in the `/docs` page: the script from this server, no web fonts
 * (they would come from fonts.scalar.com; the system's fonts are used) and no telemetry.
 * The library's type is the parsed configuration, every default filled in, hence the cast.
 */
export const scalarOptions = {
  version: SCALAR_VERSION,
  cdn: SCALAR_ASSET,
  withDefaultFonts: false,
  telemetry: false,
} as ScalarOptions

/**
 * Serves the reference UI's bundle (4 MB, about 1.2 MB gzipped). The name carries the version,
 * so browsers may keep it for a year; the gzipped copy is made once, at the first request.
 */
export function docsAssets() {
  let bytes: Uint8Array<ArrayBuffer> | undefined
  let gzipped: Uint8Array<ArrayBuffer> | undefined
  const headers = {
    'content-type': 'text/javascript; charset=utf-8',
    'cache-control': 'public, max-age=31536000, immutable',
    'x-content-type-options': 'nosniff',
    vary: 'Accept-Encoding',
  }
  return new Elysia({ name: 'liveops.docs-assets' }).get(
    SCALAR_ASSET,
    async ({ request }) => {
      bytes ??= new Uint8Array(await Bun.file(scalarBundle as string).arrayBuffer())
      if (!/\bgzip\b/i.test(request.headers.get('accept-encoding') ?? ''))
        return new Response(bytes, { headers })
      gzipped ??= Bun.gzipSync(bytes)
      return new Response(gzipped, { headers: { ...headers, 'content-encoding': 'gzip' } })
    },
    { detail: { hide: true } },
  )
}

/**
 * The hash of the one inline script element of `/docs`: Scalar's configuration, held in its
 * attribute; its content is a line break and four spaces of @elysiajs/openapi's page, no code.
 * Without it the browser reports every load of the page as a violation.
 */
const CONFIG_SCRIPT_HASH = `sha256-${new Bun.CryptoHasher('sha256').update('\n    ').digest('base64')}`

/**
 * What `/docs` may load and reach: the console's policy (plugins/console/routes.ts) but for what
 * the reference UI needs, the script element above and the styles it sets at run time, in
 * elements and attributes ('unsafe-inline' for styles only; no script may be inlined). Its
 * requests, "Test Request" included, go to this server only. Scalar probes `Function('')` and
 * does without when refused, so no 'unsafe-eval'.
 */
export const DOCS_POLICY = pagePolicy({ script: [`'${CONFIG_SCRIPT_HASH}'`], style: ["'unsafe-inline'"] })

/** The console's protective headers, on `/docs` and `/v3/api-docs` alike. */
const DOCS_HEADERS = {
  'content-security-policy': DOCS_POLICY,
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
}

/**
 * The OpenAPI description (`/v3/api-docs`) and its reference UI (`/docs`): the document's
 * title, the error bodies of each API family and the credentials a route may name. The hook
 * applies to these two routes only (it is local to this plugin).
 */
export function apiReference() {
  return new Elysia({ name: 'liveops.api-reference' })
    .onAfterHandle(({ set }) => {
      Object.assign(set.headers, DOCS_HEADERS)
    })
    .use(reference())
}

function reference() {
  return openapi({
    path: '/docs',
    specPath: '/v3/api-docs',
    // staticFile: false, or a route with a dot in its path (a roster's export.ics) is left out.
    exclude: { paths: ['/docs', '/v3/api-docs', SCALAR_ASSET], staticFile: false },
    scalar: scalarOptions,
    documentation: {
      info: {
        title: 'liveops',
        version: '1',
        description:
          'Self-hosted back end for live games. Error bodies: `/api/*` answers `{error, message, timestamp, path}`; ' +
          'the server analytics family (`/api/v1/analytics/*`) answers `{error, message, details}`; the other `/api/v1/*` routes answer the envelope ' +
          '`{code, message, data}` (code 0 on success, the HTTP status on error). Authenticated API responses carry ' +
          'X-RateLimit-Limit/Remaining/Reset; past the limit they answer 429 with Retry-After.',
      },
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
          apiKey: {
            type: 'apiKey',
            in: 'header',
            name: 'x-api-key',
            description:
              'SDK key (`lok_...`): public, bound to one game and environment; reaches only the SDK surface',
          },
          serverKey: {
            type: 'apiKey',
            in: 'header',
            name: 'x-api-key',
            description:
              'Server key (`lsk_...`, spec 2 X-API-Key): secret, scoped (config, trigger, query) like an application token',
          },
          adminToken: { type: 'apiKey', in: 'header', name: 'x-admin-token' },
          agentToken: {
            type: 'apiKey',
            in: 'header',
            name: 'x-agent-token',
            description:
              "Agents: the shared agent token (plugins.agents.token), or the agent's own key (`lak_...`, answered by registration) for that agent's routes only",
          },
          ingestSignature: {
            type: 'apiKey',
            in: 'header',
            name: 'x-signature',
            description:
              'Signed ingestion: X-Signature = hex HMAC-SHA256 of `timestamp.nonce.body` under the ingest signing secret, ' +
              'with X-Timestamp (ms) and X-Nonce (used once); GET /api/v1/ingest/secret gives the secret to admins and developers',
          },
        },
      },
      security: [{ bearer: [] }],
      // Relative: the document is served by the server it describes, wherever that is.
      servers: [{ url: '/', description: 'this server' }],
    },
  })
}

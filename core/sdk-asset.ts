import { Elysia } from 'elysia'

/**
 * The browser build of the SDK at `GET /sdk/liveops.js`, so a page imports it without a bundler:
 * `import { LiveopsClient } from 'https://liveops.example.com/sdk/liveops.js'`. Bundled from
 * `sdk/` by a macro (core/sdk-bundle.ts): at build time into the binary (scripts/build.ts), else at
 * the first request. Any origin may load it (a module script is fetched with CORS); browsers keep it
 * an hour and revalidate by its ETag, the hash of its bytes.
 */
export const SDK_PATH = '/sdk/liveops.js'

export function sdkAsset() {
  let bytes: Uint8Array<ArrayBuffer> | undefined
  let gzipped: Uint8Array<ArrayBuffer> | undefined
  let etag = ''
  return new Elysia({ name: 'liveops.sdk-asset' }).get(
    SDK_PATH,
    async ({ request }) => {
      if (!bytes) {
        const { SDK_JS } = await import('./sdk-bundle')
        bytes = new TextEncoder().encode(SDK_JS) as Uint8Array<ArrayBuffer>
        etag = `"${Bun.hash(bytes).toString(36)}"`
      }
      const headers: Record<string, string> = {
        'content-type': 'text/javascript; charset=utf-8',
        'cache-control': 'public, max-age=3600',
        etag,
        vary: 'Accept-Encoding',
      }
      if (request.headers.get('if-none-match') === etag) return new Response(null, { status: 304, headers })
      if (!/\bgzip\b/i.test(request.headers.get('accept-encoding') ?? ''))
        return new Response(bytes, { headers })
      gzipped ??= Bun.gzipSync(bytes)
      return new Response(gzipped, { headers: { ...headers, 'content-encoding': 'gzip' } })
    },
    {
      detail: {
        tags: ['sdk'],
        operationId: 'getSdkModule',
        summary: 'The browser build of the SDK (an ES module)',
        description:
          "`sdk/` bundled for browsers: `import { LiveopsClient, Experiments, GameEvents } from '/sdk/liveops.js'` in a page, no bundler needed. Public, any origin; cached an hour, revalidated by ETag (304).",
        responses: {
          '200': {
            description: 'The module',
            content: { 'text/javascript': { schema: { type: 'string' } } },
          },
          '304': { description: 'Not modified (If-None-Match matched the ETag)' },
        },
      },
    },
  )
}

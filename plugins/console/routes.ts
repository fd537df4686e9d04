import type { HTMLBundle } from 'bun'
import { Elysia, t } from 'elysia'
import { NotFound } from '../../core/http'
import type { Logger } from '../../core/log'
import { pagePolicy } from '../../core/page-policy'
import { ASSET_PREFIX, type Asset, type ConsoleFiles, loadConsole } from './assets'

/**
 * What the page may load and reach: its own scripts, styles and the API of this origin, nothing
 * else (no CDN, no inline script), and no page may frame it.
 */
const PAGE_POLICY = pagePolicy({ img: ['data:', 'blob:'] })

const acceptsGzip = (r: Request) => /\bgzip\b/i.test(r.headers.get('accept-encoding') ?? '')

function answer(request: Request, a: Asset, headers: Record<string, string>): Response {
  const h: Record<string, string> = { 'content-type': a.type, vary: 'Accept-Encoding', ...headers }
  if (!acceptsGzip(request)) return new Response(a.bytes, { headers: h })
  return new Response(a.gzipped, { headers: { ...h, 'content-encoding': 'gzip' } })
}

/**
 * `GET /` (the console's page, revalidated on every load so a new release shows at once) and
 * `GET /assets/{name}` (scripts and styles named by their content hash: cached for a year).
 * Both are public: the page holds no data; everything it shows comes from the API with the
 * signed-in user's token.
 */
export function consoleRoutes(bundle: HTMLBundle, log: Logger) {
  let files: Promise<ConsoleFiles> | undefined
  const load = () => {
    files ??= loadConsole(bundle).catch((e: unknown) => {
      files = undefined
      log.error('the console could not be loaded', { error: String(e) })
      throw e
    })
    return files
  }
  return new Elysia({ name: 'console' })
    .get(
      '/',
      async ({ request }) =>
        answer(request, (await load()).page, {
          'cache-control': 'no-cache',
          'content-security-policy': PAGE_POLICY,
          'x-content-type-options': 'nosniff',
          'referrer-policy': 'no-referrer',
        }),
      { detail: { hide: true } },
    )
    .get(
      `${ASSET_PREFIX}:name`,
      async ({ request, params }) => {
        const a = (await load()).assets.get(params.name)
        if (!a) throw new NotFound(`no console asset '${params.name}'`)
        return answer(request, a, {
          'cache-control': 'public, max-age=31536000, immutable',
          'x-content-type-options': 'nosniff',
        })
      },
      { params: t.Object({ name: t.String() }), detail: { hide: true } },
    )
}

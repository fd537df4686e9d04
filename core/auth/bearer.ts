type Headers = Record<string, string | undefined>

/**
 * The user's access token of a request: the Bearer header, then the spec 2 cookie
 * `service_token` (on a request from this site only: `cookieFromOwnSite`), then the query
 * parameter `token`.
 */
export function bearerOf(headers: Headers, query?: Record<string, unknown>): string | undefined {
  const h = headers.authorization
  if (h?.startsWith('Bearer ')) return h.slice(7).trim()
  const cookie = headers.cookie?.match(/(?:^|;\s*)service_token=([^;]+)/)?.[1]
  if (cookie && cookieFromOwnSite(headers)) {
    const token = decoded(cookie)
    if (token) return token
  }
  const q = query?.token
  return typeof q === 'string' && q ? q : undefined
}

/**
 * A cookie's value percent-decoded, or undefined when it is no valid encoding (`%E0%A4%A`): such
 * a cookie is no credential, as if absent (it threw a URIError, a 500 on every guarded route).
 */
function decoded(cookie: string): string | undefined {
  try {
    return decodeURIComponent(cookie)
  } catch {
    return undefined
  }
}

/**
 * Whether a request's cookie may stand for its sender. A browser attaches a site's cookies to
 * requests any other page makes to it (a form's POST, an image), so a cookie alone would let a
 * foreign page act as the signed-in user (cross-site request forgery: a bodyless
 * `POST /api/games/{id}/publish` took a form content type). Browsers say where a request comes
 * from (`Sec-Fetch-Site`, `Origin`), and a page cannot forge either; the cookie counts only when
 * neither names another site. Clients that send neither (curl, a server) are not browsers.
 * `Origin` is compared with the host the request was sent to (`Host`, or `X-Forwarded-Host`
 * behind a proxy: a cross-site form cannot set that header either).
 */
export function cookieFromOwnSite(headers: Headers): boolean {
  const site = headers['sec-fetch-site']
  if (site && site !== 'same-origin' && site !== 'none') return false
  const origin = headers.origin
  if (!origin) return true
  let host: string
  try {
    host = new URL(origin).host
  } catch {
    return false
  }
  return host === headers.host || host === headers['x-forwarded-host']
}

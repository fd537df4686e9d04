import { Store } from './store'

/** The page the hash names: `#/analytics/retention?interval=week`. */
export interface Route {
  path: string
  parts: string[]
  query: URLSearchParams
}

function parse(hash: string): Route {
  const raw = hash.replace(/^#/, '') || '/'
  const [path, q = ''] = raw.split('?', 2) as [string, string?]
  const clean = path.startsWith('/') ? path : `/${path}`
  return {
    path: clean,
    parts: clean.split('/').filter(Boolean).map(decodeURIComponent),
    query: new URLSearchParams(q),
  }
}

/** The current route; follows the address bar (back and forward included). */
export const route = new Store<Route>(parse(location.hash))
window.addEventListener('hashchange', () => route.set(parse(location.hash)))

/** A link target: `href('/games/' + id)`, with an optional query. */
export function href(path: string, query?: Record<string, string | undefined>): string {
  const q = new URLSearchParams()
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined && v !== '') q.set(k, v)
  const s = q.toString()
  return `#${path}${s ? `?${s}` : ''}`
}

export function navigate(path: string, query?: Record<string, string | undefined>): void {
  const target = href(path, query)
  if (location.hash === target) route.set(parse(target))
  else location.hash = target
}

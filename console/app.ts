import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useEffect } from 'preact/hooks'
import { Shell } from './components/layout'
import { Page } from './components/ui'
import { navigate, route } from './lib/router'
import { forget } from './lib/scope'
import { session } from './lib/session'
import { useStore } from './lib/store'
import { Login } from './pages/login'
import { ROUTES } from './routes'

function NotFoundPage({ path }: { path: string }): VNode {
  return html`<${Page} title="Page not found">
    <p>The console has no page at <code>${path}</code>. <a href="#/games">Go to the games</a>.</p>
  <//>`
}

function Router(): VNode {
  const r = useStore(route)
  useEffect(() => {
    if (r.path === '/') navigate('/games')
  }, [r.path])
  for (const [pattern, view] of ROUTES) {
    const m = pattern.exec(r.path)
    if (m) return view(m.slice(1).map(decodeURIComponent), r.query)
  }
  return html`<${NotFoundPage} path=${r.path} />`
}

/** Sign-in until there is a session; then the shell and the page the address names. */
export function App(): VNode {
  const s = useStore(session)
  useEffect(() => {
    if (!s) forget()
  }, [s])
  if (!s) return html`<${Login} />`
  return html`<${Shell}><${Router} /><//>`
}

import { html } from 'htm/preact'
import type { ComponentChildren, VNode } from 'preact'
import { useEffect, useState } from 'preact/hooks'
import { route } from '../lib/router'
import { choose, environments, useScope } from '../lib/scope'
import { logOut, session, useCan } from '../lib/session'
import { useStore } from '../lib/store'

interface Item {
  path: string
  label: string
  perm: string
}

/** The pages, grouped as the team thinks of them; each shown to whoever may read what it shows. */
export const NAV: Array<{ group: string; items: Item[] }> = [
  {
    group: 'Games',
    items: [
      { path: '/games', label: 'Games', perm: 'games:read' },
      { path: '/api-keys', label: 'API keys', perm: 'apikeys:read' },
      { path: '/experiments', label: 'Experiments', perm: 'experiments:read' },
    ],
  },
  {
    group: 'Analytics',
    items: [
      { path: '/analytics/overview', label: 'Overview', perm: 'analytics:read' },
      { path: '/analytics/realtime', label: 'Realtime', perm: 'analytics:read' },
      { path: '/analytics/retention', label: 'Retention', perm: 'analytics:read' },
      { path: '/analytics/funnel', label: 'Funnels', perm: 'analytics:read' },
      { path: '/analytics/paths', label: 'Paths', perm: 'analytics:read' },
      { path: '/analytics/revenue', label: 'Revenue', perm: 'analytics:read' },
      { path: '/analytics/ads', label: 'Ads', perm: 'analytics:read' },
      { path: '/analytics/sessions', label: 'Sessions', perm: 'analytics:read' },
      { path: '/analytics/levels', label: 'Levels', perm: 'analytics:read' },
    ],
  },
  {
    group: 'Notifications',
    items: [
      { path: '/incidents', label: 'Incidents', perm: 'incidents:read' },
      { path: '/alerts', label: 'Alert rules', perm: 'ops_alerts:read' },
      { path: '/notify/channels', label: 'Channels', perm: 'notify:read' },
      { path: '/notify/templates', label: 'Templates', perm: 'notify:read' },
      { path: '/notify/logs', label: 'Delivery logs', perm: 'notify:read' },
      { path: '/rules', label: 'Routing rules', perm: 'rules:read' },
      { path: '/rosters', label: 'Rosters', perm: 'rosters:read' },
    ],
  },
  {
    group: 'Operations',
    items: [
      { path: '/ml', label: 'ML models', perm: 'ml:read' },
      { path: '/ops/certificates', label: 'Certificates', perm: 'certificates:read' },
      { path: '/ops/backups', label: 'Backups', perm: 'backups:read' },
      { path: '/ops/agents', label: 'Agents', perm: 'agents:read' },
      { path: '/ops/rate-limits', label: 'Rate limits', perm: 'rate_limits:read' },
      { path: '/ops/audit', label: 'Audit log', perm: 'audit:read' },
    ],
  },
]

function Nav({ onPick }: { onPick: () => void }): VNode {
  const r = useStore(route)
  const can = useCan()
  return html`<nav id="nav" aria-label="Pages">
    ${NAV.map((g) => {
      const items = g.items.filter((i) => can(i.perm))
      if (!items.length) return null
      return html`<div class="nav-group">
        <h2>${g.group}</h2>
        <ul>
          ${items.map((i) => {
            const here = r.path === i.path || r.path.startsWith(`${i.path}/`)
            return html`<li>
              <a href=${`#${i.path}`} aria-current=${here ? 'page' : undefined} onClick=${onPick}>${i.label}</a>
            </li>`
          })}
        </ul>
      </div>`
    })}
  </nav>`
}

/** The game and environment every game-scoped page reads; shown in the header. */
export function ScopePicker(): VNode {
  const s = useScope()
  const envs = useStore(environments)
  if (!s.games) return html`<span class="scope-note" role="status">Loading games…</span>`
  if (!s.games.length) return html`<span class="scope-note">No game yet</span>`
  return html`<div class="scope" role="group" aria-label="Game and environment">
    <label>
      <span>Game</span>
      <select value=${s.gameId ?? ''} onChange=${(e: Event) => choose((e.currentTarget as HTMLSelectElement).value)}>
        ${s.games.map((g) => html`<option value=${g.id}>${g.name}</option>`)}
      </select>
    </label>
    <label>
      <span>Environment</span>
      <select
        value=${s.env}
        onChange=${(e: Event) => choose(s.gameId, (e.currentTarget as HTMLSelectElement).value)}
      >
        ${(envs?.length ? envs.map((e) => e.name) : [s.env]).map((n) => html`<option value=${n}>${n}</option>`)}
      </select>
    </label>
  </div>`
}

export function Shell({ children }: { children: ComponentChildren }): VNode {
  const s = useStore(session)
  const r = useStore(route)
  const [open, setOpen] = useState(false)
  // A page picked from the menu closes it (on phones the menu covers the page).
  // biome-ignore lint/correctness/useExhaustiveDependencies: the path is the trigger, not an input
  useEffect(() => setOpen(false), [r.path])
  return html`<div class="shell">
    <a class="skip" href="#main" onClick=${(e: Event) => {
      e.preventDefault()
      document.getElementById('main')?.focus()
    }}>Skip to content</a>
    <header class="top">
      <button
        type="button"
        class="menu-toggle secondary"
        aria-expanded=${open ? 'true' : 'false'}
        aria-controls="nav"
        onClick=${() => setOpen(!open)}
      >
        Menu
      </button>
      <a class="brand" href="#/games">liveops</a>
      <${ScopePicker} />
      <div class="who">
        <span class="user">${s?.user.name || s?.user.email} <span class="role">(${s?.roles.join(', ')})</span></span>
        <button type="button" class="secondary" onClick=${() => void logOut()}>Sign out</button>
      </div>
    </header>
    <div class=${`body ${open ? 'nav-open' : ''}`}>
      <${Nav} onPick=${() => setOpen(false)} />
      <main id="main" tabindex="-1">${children}</main>
    </div>
  </div>`
}

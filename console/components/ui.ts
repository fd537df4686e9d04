import { html } from 'htm/preact'
import type { ComponentChildren, VNode } from 'preact'
import { useEffect, useRef } from 'preact/hooks'
import type { ApiError } from '../lib/api'
import type { Action, Loaded } from '../lib/hooks'
import { useCan } from '../lib/session'

const TITLES: Record<number, string> = {
  0: 'No connection.',
  400: 'Not accepted.',
  401: 'Not signed in.',
  403: 'Not allowed.',
  404: 'Not found.',
  409: 'Not possible now.',
  429: 'Too many requests.',
  503: 'Unavailable.',
}

/** The API's message, with what the status means and when to try again. */
export function errorText(e: ApiError): string {
  const title = TITLES[e.status] ?? (e.status >= 500 ? 'The server failed.' : 'Refused.')
  const wait = e.retryAfter ? ` Try again in ${e.retryAfter} s.` : ''
  return `${title} ${e.message}${wait}`
}

export function Loading({ what = '' }: { what?: string }): VNode {
  return html`<p class="state loading" role="status"><span class="spinner" aria-hidden="true"></span>Loading${what ? ` ${what}` : ''}…</p>`
}

export function Empty({ children }: { children: ComponentChildren }): VNode {
  return html`<div class="state empty">${children}</div>`
}

export function ErrorNote({ error, retry }: { error: ApiError; retry?: () => void }): VNode {
  return html`<div class="state error" role="alert">
    <p>${errorText(error)}</p>
    ${retry && html`<button type="button" class="secondary" onClick=${retry}>Try again</button>`}
  </div>`
}

/**
 * The three states of a read: loading (first load only; a reload keeps the old data on screen),
 * the API's error with a retry, empty, then `render` with the data.
 */
export function Async<T>(props: {
  state: Loaded<T>
  what?: string
  isEmpty?: (d: T) => boolean
  empty?: ComponentChildren
  render: (d: T) => ComponentChildren
}): VNode {
  const { state, what, isEmpty, empty, render } = props
  if (state.error) return html`<${ErrorNote} error=${state.error} retry=${state.reload} />`
  if (state.data === undefined) return state.loading ? html`<${Loading} what=${what} />` : html``
  if (isEmpty?.(state.data)) return html`<${Empty}>${empty ?? html`<p>Nothing here yet.</p>`}<//>`
  return html`<div aria-busy=${state.loading ? 'true' : 'false'}>${render(state.data)}</div>`
}

/** What an action said: its refusal (an alert) or its success (a status line). */
export function ActionNote({ action }: { action: Action }): VNode {
  if (action.error) return html`<p class="note error" role="alert">${errorText(action.error)}</p>`
  return html`<p class="note ok" role="status">${action.done ?? ''}</p>`
}

/** Shows its children only to a user holding `perm`. */
export function Can({ perm, children }: { perm: string; children: ComponentChildren }): VNode {
  const can = useCan()
  return can(perm) ? html`${children}` : html``
}

/**
 * A page: its heading (focused when the page opens, so keyboard and screen-reader users start
 * there), its actions and its body; sets the document title.
 */
export function Page(props: {
  title: string
  actions?: ComponentChildren
  children: ComponentChildren
}): VNode {
  const h = useRef<HTMLHeadingElement>(null)
  useEffect(() => {
    document.title = `${props.title} · liveops`
    // A new page starts at its top, whatever the last one was scrolled to.
    window.scrollTo(0, 0)
    h.current?.focus({ preventScroll: true })
  }, [props.title])
  return html`<div class="page">
    <div class="page-head">
      <h1 tabindex="-1" ref=${h}>${props.title}</h1>
      ${props.actions && html`<div class="actions">${props.actions}</div>`}
    </div>
    ${props.children}
  </div>`
}

export function Section(props: {
  title: string
  actions?: ComponentChildren
  children: ComponentChildren
}): VNode {
  return html`<section class="card">
    <div class="card-head"><h2>${props.title}</h2>${props.actions && html`<div class="actions">${props.actions}</div>`}</div>
    ${props.children}
  </section>`
}

/** A status word as a coloured badge (the word itself carries the meaning, not the colour). */
export function Badge({ value, tone }: { value: string; tone?: string }): VNode {
  const t = tone ?? TONES[value.toLowerCase()] ?? 'neutral'
  return html`<span class=${`badge ${t}`}>${value}</span>`
}

const TONES: Record<string, string> = {
  live: 'good',
  running: 'good',
  active: 'good',
  succeeded: 'good',
  success: 'good',
  sent: 'good',
  online: 'good',
  deployed: 'good',
  completed: 'good',
  resolved: 'good',
  up: 'good',
  acked: 'info',
  testing: 'info',
  evaluating: 'info',
  training: 'info',
  pending: 'info',
  draft: 'neutral',
  development: 'neutral',
  paused: 'warn',
  maintenance: 'warn',
  expiring: 'warn',
  retrying: 'warn',
  shadow: 'warn',
  open: 'bad',
  failed: 'bad',
  expired: 'bad',
  offline: 'bad',
  down: 'bad',
  discontinued: 'bad',
  critical: 'bad',
  error: 'bad',
}

/** A key and its value, for read-only details. */
export function Facts({ items }: { items: Array<[string, ComponentChildren]> }): VNode {
  return html`<dl class="facts">${items.map(([k, v]) => html`<div><dt>${k}</dt><dd>${v}</dd></div>`)}</dl>`
}

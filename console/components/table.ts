import { html } from 'htm/preact'
import type { ComponentChildren, VNode } from 'preact'
import { useId, useRef, useState } from 'preact/hooks'

export interface Column<T> {
  label: string
  value: (row: T) => ComponentChildren
  numeric?: boolean
}

/**
 * A data table with a caption. Wide tables scroll inside a region a keyboard can focus and
 * scroll, named by the caption.
 */
export function Table<T>(p: {
  caption: string
  columns: Column<T>[]
  rows: readonly T[]
  rowKey: (row: T) => string
  /** The caption is read by assistive technology but not shown (the section heading says it). */
  hideCaption?: boolean
}): VNode {
  return html`<div class="table-wrap" role="region" aria-label=${p.caption} tabindex="0">
    <table>
      <caption class=${p.hideCaption ? 'sr-only' : undefined}>${p.caption}</caption>
      <thead>
        <tr>${p.columns.map((c) => html`<th scope="col" class=${c.numeric ? 'num' : undefined}>${c.label}</th>`)}</tr>
      </thead>
      <tbody>
        ${p.rows.map(
          (r) => html`<tr key=${p.rowKey(r)}>
            ${p.columns.map((c) => html`<td class=${c.numeric ? 'num' : undefined}>${c.value(r)}</td>`)}
          </tr>`,
        )}
      </tbody>
    </table>
  </div>`
}

/**
 * A secret shown once (a new API key): read-only, selected on focus, with a copy button that
 * says whether the copy worked.
 */
export function Secret({ label, value }: { label: string; value: string }): VNode {
  const input = useRef<HTMLInputElement>(null)
  const id = useId()
  const [said, setSaid] = useState('')
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value)
      setSaid('Copied to the clipboard.')
    } catch {
      // Outside a secure context the clipboard API is absent: select the text for Ctrl+C.
      input.current?.select()
      setSaid(document.execCommand('copy') ? 'Copied to the clipboard.' : 'Selected: press Ctrl+C to copy.')
    }
  }
  return html`<div class="secret">
    <label for=${id}>${label}</label>
    <div class="secret-row">
      <input
        id=${id}
        class="mono"
        readonly
        value=${value}
        ref=${input}
        onFocus=${(e: Event) => (e.currentTarget as HTMLInputElement).select()}
      />
      <button type="button" onClick=${copy}>Copy</button>
    </div>
    <p class="note" role="status">${said}</p>
  </div>`
}

/** Previous and next links between pages of a list (`to(page)` is the link of a 0-based page). */
export function Pager(p: {
  page: number
  pages: number
  to: (page: number) => string
  label: string
}): VNode {
  if (p.pages <= 1) return html``
  const link = (target: number, text: string) =>
    target < 0 || target >= p.pages
      ? html`<span class="disabled" aria-disabled="true">${text}</span>`
      : html`<a href=${p.to(target)}>${text}</a>`
  return html`<nav class="pager" aria-label=${p.label}>
    ${link(p.page - 1, 'Previous')}
    <span>Page ${p.page + 1} of ${p.pages}</span>
    ${link(p.page + 1, 'Next')}
  </nav>`
}

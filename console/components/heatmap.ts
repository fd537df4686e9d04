import { html } from 'htm/preact'
import type { VNode } from 'preact'

const LOW = [239, 246, 255]
const HIGH = [12, 46, 117]

const mix = (v: number) => {
  const t = Math.max(0, Math.min(1, v))
  return LOW.map((lo, i) => Math.round(lo + (HIGH[i] - lo) * t))
}

/** The colour of a share 0..1 on a light-to-dark blue scale. */
export function heat(v: number): string {
  const [r, g, b] = mix(v)
  return `rgb(${r}, ${g}, ${b})`
}

/** WCAG relative luminance of an sRGB colour. */
const luminance = (rgb: number[]) => {
  const [r, g, b] = rgb.map((c) => {
    const x = c / 255
    return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4
  })
  return 0.2126 * r + 0.7152 * g + 0.0722 * b
}

/**
 * The text colour, black or white, with the higher contrast on the cell's colour: at worst
 * 4.58:1, where both are equal.
 */
export function ink(v: number): string {
  const l = luminance(mix(v))
  return (l + 0.05) / 0.05 >= 1.05 / (l + 0.05) ? '#000000' : '#ffffff'
}

export interface HeatRow {
  label: string
  /** Shown after the label (cohort size). */
  aside?: string
  cells: Array<{ value: number | null; text: string }>
}

/**
 * A heat map as a table: each cell coloured by its share and its number written in it, so the
 * colour is never the only carrier (retention matrix).
 */
export function HeatTable(p: {
  caption: string
  corner: string
  aside?: string
  columns: string[]
  rows: HeatRow[]
}): VNode {
  return html`<div class="table-wrap" role="region" aria-label=${p.caption} tabindex="0">
    <table class="heat">
      <caption>${p.caption}</caption>
      <thead>
        <tr>
          <th scope="col">${p.corner}</th>
          ${p.aside && html`<th scope="col" class="num">${p.aside}</th>`}
          ${p.columns.map((c) => html`<th scope="col" class="num">${c}</th>`)}
        </tr>
      </thead>
      <tbody>
        ${p.rows.map(
          (r) => html`<tr>
            <th scope="row">${r.label}</th>
            ${p.aside && html`<td class="num">${r.aside}</td>`}
            ${r.cells.map((c) =>
              c.value === null
                ? html`<td class="num empty-cell"><span class="sr-only">no data yet</span></td>`
                : html`<td class="num" style=${{ background: heat(c.value), color: ink(c.value) }}>${c.text}</td>`,
            )}
          </tr>`,
        )}
      </tbody>
    </table>
  </div>`
}

/**
 * A grid of counts drawn as squares (deaths on a map), rows from the smallest y at the bottom as
 * a map reads. Described in words for screen readers; each square names its count on hover.
 */
export function HeatGrid(p: {
  title: string
  grid: number[][]
  bounds: { minX: number; maxX: number; minY: number; maxY: number }
  size?: number
}): VNode {
  const n = p.grid.length
  const size = p.size ?? 360
  const cell = size / Math.max(1, n)
  const max = Math.max(1, ...p.grid.flat())
  let hot = { v: 0, x: 0, y: 0 }
  p.grid.forEach((row, y) =>
    row.forEach((v, x) => {
      if (v > hot.v) hot = { v, x, y }
    }),
  )
  const w = (p.bounds.maxX - p.bounds.minX) / Math.max(1, n)
  const h = (p.bounds.maxY - p.bounds.minY) / Math.max(1, n)
  const range = (lo: number, step: number, i: number) =>
    `${(lo + step * i).toFixed(1)}–${(lo + step * (i + 1)).toFixed(1)}`
  const total = p.grid.flat().reduce((a, b) => a + b, 0)
  const summary = total
    ? `${p.title}: ${total} deaths in a ${n} by ${n} grid; the most, ${hot.v}, at x ${range(p.bounds.minX, w, hot.x)}, y ${range(p.bounds.minY, h, hot.y)}.`
    : `${p.title}: no deaths.`
  return html`<figure class="heatgrid">
    <figcaption>${p.title}</figcaption>
    <svg viewBox=${`0 0 ${size} ${size}`} width=${size} height=${size} role="img" aria-label=${summary}>
      ${p.grid.map((row, y) =>
        row.map(
          (v, x) => html`<rect
            x=${x * cell}
            y=${(n - 1 - y) * cell}
            width=${cell - 1}
            height=${cell - 1}
            fill=${v ? heat(0.12 + (0.88 * v) / max) : '#f3f4f6'}
          ><title>${`x ${range(p.bounds.minX, w, x)}, y ${range(p.bounds.minY, h, y)}: ${v}`}</title></rect>`,
        ),
      )}
    </svg>
    <p class="hint">${summary}</p>
  </figure>`
}

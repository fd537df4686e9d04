import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useEffect, useRef } from 'preact/hooks'
import uPlot from 'uplot'

export interface Series {
  label: string
  values: Array<number | null>
  /** Values on a second axis at the right (revenue beside counts). */
  right?: boolean
}

/** Distinct at a glance and each at least 3:1 against white. */
export const COLORS = ['#1d4ed8', '#c2410c', '#15803d', '#7e22ce', '#b91c1c', '#0f766e']

/**
 * A line chart (uPlot) of series over time, with its numbers in a data table beneath it for
 * whoever cannot read the picture. `x`: epoch seconds.
 */
export function LineChart(p: {
  title: string
  x: number[]
  series: Series[]
  height?: number
  format?: (v: number) => string
  /** Times are whole days: the axis and the table show dates. */
  days?: boolean
}): VNode {
  const box = useRef<HTMLDivElement>(null)
  useEffect(() => {
    const el = box.current
    if (!el) return
    const fmt = p.format ?? ((v: number) => String(v))
    const opts: uPlot.Options = {
      width: Math.max(280, el.clientWidth),
      height: p.height ?? 240,
      legend: { show: true },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true }, ...(p.series.some((s) => s.right) ? { r: {} } : {}) },
      axes: [
        { stroke: '#374151', grid: { stroke: '#e5e7eb' } },
        {
          stroke: '#374151',
          grid: { stroke: '#e5e7eb' },
          values: (_u, vals) => vals.map((v) => fmt(v)),
          size: 60,
        },
        ...(p.series.some((s) => s.right)
          ? [{ scale: 'r', side: 1 as const, stroke: '#374151', grid: { show: false }, size: 60 }]
          : []),
      ],
      series: [
        { label: p.days ? 'Day' : 'Time' },
        ...p.series.map((s, i) => ({
          label: s.label,
          stroke: COLORS[i % COLORS.length],
          width: 2,
          scale: s.right ? 'r' : 'y',
          value: (_u: uPlot, v: number | null) => (v === null ? '–' : fmt(v)),
          points: { show: p.x.length < 40 },
        })),
      ],
    }
    const chart = new uPlot(opts, [p.x, ...p.series.map((s) => s.values)] as uPlot.AlignedData, el)
    // The canvas is a picture of the table below; the legend repeats the series names.
    for (const c of Array.from(el.querySelectorAll('canvas'))) c.setAttribute('aria-hidden', 'true')
    const ro = new ResizeObserver(() =>
      chart.setSize({ width: Math.max(280, el.clientWidth), height: p.height ?? 240 }),
    )
    ro.observe(el)
    return () => {
      ro.disconnect()
      chart.destroy()
    }
  }, [p.x, p.series, p.height, p.days, p.format])
  const label = (t: number) =>
    p.days
      ? new Date(t * 1000).toISOString().slice(0, 10)
      : new Date(t * 1000).toLocaleTimeString('en-GB', { hour: '2-digit', minute: '2-digit' })
  const fmt = p.format ?? ((v: number) => String(v))
  return html`<figure class="chart">
    <figcaption>${p.title}</figcaption>
    <div ref=${box} class="chart-box"></div>
    <details>
      <summary>Data table<span class="sr-only">: ${p.title}</span></summary>
      <div class="table-wrap" role="region" aria-label=${`${p.title}: data`} tabindex="0">
        <table>
          <thead>
            <tr>
              <th scope="col">${p.days ? 'Day' : 'Time'}</th>
              ${p.series.map((s) => html`<th scope="col" class="num">${s.label}</th>`)}
            </tr>
          </thead>
          <tbody>
            ${p.x.map(
              (t, i) => html`<tr>
                <td>${label(t)}</td>
                ${p.series.map((s) => html`<td class="num">${s.values[i] === null ? '–' : fmt(s.values[i] as number)}</td>`)}
              </tr>`,
            )}
          </tbody>
        </table>
      </div>
    </details>
  </figure>`
}

/** Epoch seconds of a `YYYY-MM-DD` day (its UTC midnight). */
export const daySeconds = (d: string): number => Date.parse(`${d.slice(0, 10)}T00:00:00Z`) / 1000

/** Horizontal bars with their numbers written beside them (funnels, breakdowns). */
export function Bars(p: {
  title: string
  rows: Array<{ label: string; value: number; text: string; note?: string }>
}): VNode {
  const max = Math.max(1e-9, ...p.rows.map((r) => r.value))
  return html`<figure class="bars">
    <figcaption>${p.title}</figcaption>
    <ol>
      ${p.rows.map(
        (r) => html`<li>
          <span class="bar-label">${r.label}</span>
          <span class="bar-track" aria-hidden="true"><span class="bar-fill" style=${{ width: `${(r.value / max) * 100}%` }}></span></span>
          <span class="bar-value">${r.text}${r.note && html` <span class="hint">${r.note}</span>`}</span>
        </li>`,
      )}
    </ol>
  </figure>`
}

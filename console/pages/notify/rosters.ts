import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useState } from 'preact/hooks'
import { Form, Input, Select, TextArea } from '../../components/form'
import { ActionNote, Async, Can, Empty, Page, Section } from '../../components/ui'
import { api } from '../../lib/api'
import { download } from '../../lib/download'
import { useAction, useApi } from '../../lib/hooks'
import { navigate } from '../../lib/router'

interface Period {
  start: string
  end: string
}
interface Roster {
  id: string
  description: string
  periods: Period[]
}

const DAY = 86_400_000
const time = (d: Date) => d.toLocaleTimeString('en-GB', { hour: '2-digit', minute: '2-digit' })

/** The shifts of each day of a month, a week per row, Monday first, in the reader's time zone. */
export function MonthCalendar({ periods, month }: { periods: Period[]; month: Date }): VNode {
  const first = new Date(month.getFullYear(), month.getMonth(), 1)
  const start = new Date(first.getTime() - ((first.getDay() + 6) % 7) * DAY)
  const weeks: Date[][] = []
  for (let w = 0; w < 6; w++) {
    const row = Array.from(
      { length: 7 },
      (_, i) => new Date(start.getFullYear(), start.getMonth(), start.getDate() + w * 7 + i),
    )
    if (w > 3 && row[0].getMonth() !== month.getMonth()) break
    weeks.push(row)
  }
  const spans = periods.map((p) => ({ s: new Date(p.start), e: new Date(p.end) }))
  const today = new Date().toDateString()
  return html`<div class="table-wrap" role="region" aria-label="On-call calendar" tabindex="0">
    <table class="calendar">
      <caption>${month.toLocaleDateString('en-GB', { month: 'long', year: 'numeric' })}</caption>
      <thead><tr>${['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'].map((d) => html`<th scope="col">${d}</th>`)}</tr></thead>
      <tbody>
        ${weeks.map(
          (row) => html`<tr>
            ${row.map((day) => {
              const end = new Date(day.getFullYear(), day.getMonth(), day.getDate() + 1)
              const shifts = spans.filter((p) => p.s < end && p.e > day)
              const other = day.getMonth() !== month.getMonth()
              return html`<td class=${`${other ? 'other' : ''} ${day.toDateString() === today ? 'today' : ''}`}>
                <div class="day-no">${day.getDate()}${day.toDateString() === today ? html`<span class="sr-only"> (today)</span>` : ''}</div>
                ${shifts.map((p) => html`<div class="shift">${p.s < day ? '…' : time(p.s)}–${p.e > end ? '…' : time(p.e)}</div>`)}
              </td>`
            })}
          </tr>`,
        )}
      </tbody>
    </table>
  </div>`
}

function Import({ id, onDone }: { id: string; onDone: () => void }): VNode {
  const [text, setText] = useState('')
  const act = useAction()
  const readFile = async (e: Event) => {
    const f = (e.currentTarget as HTMLInputElement).files?.[0]
    if (f) setText(await f.text())
  }
  return html`<${Form}
    label="Import a calendar"
    onSubmit=${() => text.trim() && act.run(() => api.v1('POST', `/api/v1/rosters/${encodeURIComponent(id)}/import`, { raw: text, type: 'text/calendar' }), 'Imported: the roster now holds these shifts.').then((ok) => ok && onDone())}
  >
    <div class="field">
      <label for="ics-file">Calendar file (.ics)</label>
      <input id="ics-file" type="file" accept=".ics,text/calendar" onChange=${readFile} />
    </div>
    <${TextArea} label="Or paste the calendar" mono rows=${5} value=${text} onValue=${setText} hint="Recurring shifts (RRULE) are expanded for the next 90 days; the import replaces the roster's periods." />
    <${ActionNote} action=${act} />
    <div><button type="submit" disabled=${act.busy || !text.trim()}>Import into ${id}</button></div>
  <//>`
}

/** `datetime-local` text (the reader's time) as an ISO instant. */
const instant = (local: string) => (local ? new Date(local).toISOString() : '')

/** A roster starts with its first shift (the API keeps no empty roster); a calendar can replace it. */
function NewRoster({ onDone }: { onDone: (id: string) => void }): VNode {
  const [id, setId] = useState('')
  const [description, setDescription] = useState('')
  const [start, setStart] = useState('')
  const [end, setEnd] = useState('')
  const act = useAction()
  const ready = id.trim() && start && end
  return html`<${Form}
    label="New roster"
    onSubmit=${() =>
      ready &&
      act
        .run(() =>
          api.v1('POST', '/api/v1/rosters', {
            body: { id: id.trim(), description, periods: [{ start: instant(start), end: instant(end) }] },
          }),
        )
        .then((ok) => ok && onDone(id.trim()))}
  >
    <div class="grid2">
      <${Input} label="Roster id" value=${id} onValue=${setId} required />
      <${Input} label="Description" value=${description} onValue=${setDescription} />
      <${Input} label="First shift starts" type="datetime-local" value=${start} onValue=${setStart} required />
      <${Input} label="First shift ends" type="datetime-local" value=${end} onValue=${setEnd} required />
    </div>
    <${ActionNote} action=${act} />
    <div><button type="submit" disabled=${act.busy || !ready}>Create roster</button></div>
  <//>`
}

/** `#/rosters`: on-call rosters as a month calendar, with iCalendar import and export. */
export function Rosters({ query }: { query: URLSearchParams }): VNode {
  const list = useApi((signal) => api.v1<{ rosters: Roster[] }>('GET', '/api/v1/rosters', { signal }), [])
  const [adding, setAdding] = useState(false)
  const [offset, setOffset] = useState(0)
  const exp = useAction()
  const rosters = list.data?.rosters ?? []
  const id = query.get('id') ?? rosters[0]?.id
  const roster = rosters.find((r) => r.id === id)
  const now = new Date()
  const month = new Date(now.getFullYear(), now.getMonth() + offset, 1)
  return html`<${Page}
    title="Rosters"
    actions=${html`<${Can} perm="rosters:write"><button type="button" onClick=${() => setAdding(true)} disabled=${adding}>New roster</button><//>`}
  >
    ${
      adding &&
      html`<${Section} title="New roster">
        <${NewRoster}
          onDone=${(n: string) => {
            setAdding(false)
            list.reload()
            navigate('/rosters', { id: n })
          }}
        />
      <//>`
    }
    <${Async}
      state=${list}
      what="rosters"
      isEmpty=${(d: { rosters: Roster[] }) => d.rosters.length === 0}
      empty=${html`<p>No roster yet. A rule can stay silent while a roster's shift covers the moment.</p>`}
      render=${() => html`
        <div class="filters">
          <${Select} label="Roster" value=${id ?? ''} options=${rosters.map((r) => r.id)} onValue=${(v: string) => navigate('/rosters', { id: v })} />
        </div>
        ${
          roster
            ? html`<${Section}
                title=${`${roster.id}${roster.description ? `: ${roster.description}` : ''}`}
                actions=${html`<div class="buttons">
                  <button type="button" class="secondary" onClick=${() => setOffset(offset - 1)}>Previous month</button>
                  <button type="button" class="secondary" onClick=${() => setOffset(0)} disabled=${offset === 0}>This month</button>
                  <button type="button" class="secondary" onClick=${() => setOffset(offset + 1)}>Next month</button>
                  <button type="button" class="secondary" onClick=${() => exp.run(() => download(`/api/v1/rosters/${encodeURIComponent(roster.id)}/export.ics`, `${roster.id}.ics`))}>Export .ics</button>
                </div>`}
              >
                <p class="hint">${roster.periods.length} shifts; times in your time zone.</p>
                <${ActionNote} action=${exp} />
                ${roster.periods.length === 0 ? html`<${Empty}><p>No shift: import a calendar below.</p><//>` : html`<${MonthCalendar} periods=${roster.periods} month=${month} />`}
              <//>
              <${Can} perm="rosters:write"><${Section} title="Import a calendar"><${Import} id=${roster.id} onDone=${list.reload} /><//><//>`
            : html`<p>No roster named ${id}.</p>`
        }
      `}
    />
  <//>`
}

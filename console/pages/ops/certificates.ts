import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useState } from 'preact/hooks'
import { Form, Input, TextArea } from '../../components/form'
import { Table } from '../../components/table'
import { ActionNote, Async, Badge, Can, Page, Section } from '../../components/ui'
import { api } from '../../lib/api'
import { when } from '../../lib/format'
import { useAction, useApi } from '../../lib/hooks'
import { href, navigate } from '../../lib/router'

interface Cert {
  id: string
  domain: string
  port: number
  source: string
  status: string
  issuer?: string
  commonName?: string
  validTo?: string
  daysLeft?: number
  thresholdDays: number
  lastChecked?: string
  error?: string
}
interface Stats {
  total: number
  active: number
  expiring: number
  expired: number
  unknown: number
}

const STATES = ['expired', 'expiring', 'active', 'unknown'] as const

function Register({ onDone }: { onDone: () => void }): VNode {
  const [d, set] = useState({ domain: '', port: '443', pem: '', threshold: '30' })
  const act = useAction()
  const field = (k: keyof typeof d) => (v: string) => set({ ...d, [k]: v })
  const submit = () =>
    d.domain.trim() &&
    act
      .run(
        () =>
          api.v1('POST', '/api/v1/certificates', {
            body: {
              domain: d.domain.trim(),
              port: Number(d.port),
              certificate: d.pem.trim() || undefined,
              thresholdDays: Number(d.threshold),
            },
          }),
        'Registered.',
      )
      .then((ok) => ok && onDone())
  return html`<${Form} label="Register a certificate" onSubmit=${submit}>
    <div class="grid3">
      <${Input} label="Domain" value=${d.domain} onValue=${field('domain')} required />
      <${Input} label="Port" type="number" value=${d.port} onValue=${field('port')} />
      <${Input} label="Warn days before expiry" type="number" min=${1} value=${d.threshold} onValue=${field('threshold')} />
    </div>
    <${TextArea} label="Certificate (PEM)" mono rows=${5} value=${d.pem} onValue=${field('pem')} hint="Leave empty to read the certificate from the server itself (a TLS handshake)." />
    <${ActionNote} action=${act} />
    <div><button type="submit" disabled=${act.busy || !d.domain.trim()}>Register</button></div>
  <//>`
}

/** `#/ops/certificates`: certificates by state (expired, expiring, active, unknown), registration and checks. */
export function Certificates({ query }: { query: URLSearchParams }): VNode {
  const status = query.get('status') ?? ''
  const stats = useApi((signal) => api.v1<Stats>('GET', '/api/v1/certificates/stats', { signal }), [])
  const list = useApi(
    (signal) =>
      api.v1<{ items: Cert[]; total: number }>('GET', '/api/v1/certificates', { query: { status }, signal }),
    [status],
  )
  const [adding, setAdding] = useState(false)
  const act = useAction()
  const reload = () => {
    list.reload()
    stats.reload()
  }
  return html`<${Page}
    title="Certificates"
    actions=${html`<${Can} perm="certificates:write">
      <button type="button" class="secondary" disabled=${act.busy} onClick=${() => act.run(() => api.v1('POST', '/api/v1/certificates/check-all'), 'Checked every certificate.').then(reload)}>Check all now</button>
      <button type="button" onClick=${() => setAdding(true)} disabled=${adding}>Register</button>
    <//>`}
  >
    <${ActionNote} action=${act} />
    ${
      adding &&
      html`<${Section} title="Register a certificate">
        <${Register}
          onDone=${() => {
            setAdding(false)
            reload()
          }}
        />
      <//>`
    }
    <${Async}
      state=${stats}
      what="certificate counts"
      render=${(s: Stats) => html`<nav class="states" aria-label="Certificates by state">
        <a href=${href('/ops/certificates')} aria-current=${status === '' ? 'true' : undefined}>All <strong>${s.total}</strong></a>
        ${STATES.map((k) => html`<a href=${href('/ops/certificates', { status: k })} aria-current=${status === k ? 'true' : undefined}><${Badge} value=${k} /> <strong>${s[k]}</strong></a>`)}
      </nav>`}
    />
    <${Async}
      state=${list}
      what="certificates"
      isEmpty=${(d: { items: Cert[] }) => d.items.length === 0}
      empty=${html`<p>${status ? `No certificate is ${status}.` : 'No certificate is watched yet.'}</p>`}
      render=${(d: { items: Cert[] }) => html`<${Table}
        caption=${`Certificates${status ? ` (${status})` : ''}`}
        hideCaption
        rows=${d.items}
        rowKey=${(c: Cert) => c.id}
        columns=${[
          { label: 'Domain', value: (c: Cert) => html`<strong>${c.domain}</strong>:${c.port}` },
          { label: 'State', value: (c: Cert) => html`<${Badge} value=${c.status} />` },
          { label: 'Days left', value: (c: Cert) => c.daysLeft ?? '–', numeric: true },
          { label: 'Valid to', value: (c: Cert) => when(c.validTo) },
          { label: 'Issuer', value: (c: Cert) => c.issuer ?? '–' },
          {
            label: 'Checked',
            value: (c: Cert) =>
              html`${when(c.lastChecked)}${c.error ? html`<br /><span class="field-error">${c.error}</span>` : ''}`,
          },
          {
            label: 'Actions',
            value: (c: Cert) => html`<${Can} perm="certificates:write">
              <div class="buttons">
                <button type="button" class="secondary small" disabled=${act.busy} onClick=${() => act.run(() => api.v1('POST', `/api/v1/certificates/${c.id}/check`), `Checked ${c.domain}.`).then(reload)}>
                  Check<span class="sr-only"> ${c.domain}</span>
                </button>
                <button type="button" class="danger small" disabled=${act.busy} onClick=${() => act.run(() => api.v1('DELETE', `/api/v1/certificates/${c.id}`), 'Deleted.').then(reload)}>
                  Delete<span class="sr-only"> ${c.domain}</span>
                </button>
              </div>
            <//>`,
          },
        ]}
      />`}
    />
    ${status && html`<p><button type="button" class="secondary" onClick=${() => navigate('/ops/certificates')}>Show every state</button></p>`}
  <//>`
}

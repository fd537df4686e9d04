import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { Table } from '../../components/table'
import { ActionNote, Async, Badge, Can, Page } from '../../components/ui'
import { api } from '../../lib/api'
import { download } from '../../lib/download'
import { when } from '../../lib/format'
import { useAction, useApi, useInterval } from '../../lib/hooks'
import { session } from '../../lib/session'
import { useStore } from '../../lib/store'

interface Backup {
  id: string
  name: string
  driver: string
  trigger: string
  status: string
  size?: number
  checksum?: string
  error?: string
  createdAt: string
  completedAt?: string
}

const size = (n?: number) =>
  n === undefined ? '–' : n < 1e6 ? `${(n / 1024).toFixed(0)} KB` : `${(n / 1e6).toFixed(1)} MB`

/** `#/ops/backups`: backups of the store: start one (it runs in the background), download, delete. */
export function Backups(): VNode {
  const list = useApi((signal) => api.v1<{ items: Backup[] }>('GET', '/api/v1/backups', { signal }), [])
  const admin = useStore(session)?.roles.includes('admin') ?? false
  const act = useAction()
  const busy = list.data?.items.some((b) => b.status === 'pending' || b.status === 'running') ?? false
  useInterval(list.reload, 1500, busy)
  return html`<${Page}
    title="Backups"
    actions=${html`<${Can} perm="backups:write">
      <button type="button" disabled=${act.busy} onClick=${() => act.run(() => api.v1('POST', '/api/v1/backups', { body: {} }), 'Backup started.').then(list.reload)}>Start a backup</button>
    <//>`}
  >
    <p class="intro">A consistent copy of the connected store, written under the data directory; its checksum is verified before a download.</p>
    <${ActionNote} action=${act} />
    ${busy && html`<p class="state loading" role="status"><span class="spinner" aria-hidden="true"></span>A backup is running…</p>`}
    <${Async}
      state=${list}
      what="backups"
      isEmpty=${(d: { items: Backup[] }) => d.items.length === 0}
      empty=${html`<p>No backup yet.</p>`}
      render=${(d: { items: Backup[] }) => html`<${Table}
        caption="Backups"
        hideCaption
        rows=${d.items}
        rowKey=${(b: Backup) => b.id}
        columns=${[
          { label: 'Started', value: (b: Backup) => when(b.createdAt) },
          {
            label: 'Status',
            value: (b: Backup) =>
              html`<${Badge} value=${b.status} />${b.error ? html` <span class="field-error">${b.error}</span>` : ''}`,
          },
          { label: 'Store', value: (b: Backup) => b.driver },
          { label: 'By', value: (b: Backup) => b.trigger },
          { label: 'Size', value: (b: Backup) => size(b.size), numeric: true },
          {
            label: 'SHA-256',
            value: (b: Backup) =>
              b.checksum ? html`<code title=${b.checksum}>${b.checksum.slice(0, 12)}…</code>` : '–',
          },
          {
            label: 'Actions',
            value: (b: Backup) => html`<div class="buttons">
              ${
                // The file holds the secrets the API masks: the server lets only admins take it.
                admin &&
                b.status === 'succeeded' &&
                html`<button type="button" class="secondary small" disabled=${act.busy} onClick=${() => act.run(() => download(`/api/v1/backups/${b.id}/download`, `liveops-${b.id}`), 'Downloaded.')}>
                  Download<span class="sr-only"> the backup of ${when(b.createdAt)}</span>
                </button>`
              }
              <${Can} perm="backups:write">
                <button type="button" class="danger small" disabled=${act.busy} onClick=${() => act.run(() => api.v1('DELETE', `/api/v1/backups/${b.id}`), 'Deleted.').then(list.reload)}>
                  Delete<span class="sr-only"> the backup of ${when(b.createdAt)}</span>
                </button>
              <//>
            </div>`,
          },
        ]}
      />`}
    />
  <//>`
}

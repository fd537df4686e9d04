import { existsSync } from 'node:fs'
import { join } from 'node:path'
import type { TSchema } from '@sinclair/typebox'
import { Elysia, t } from 'elysia'
import { auditor } from '../../core/audit'
import { Conflict, Forbidden, HttpError, invalidField, ok } from '../../core/http'
import type { PluginContext } from '../../core/plugin'
import { rejectUnknown } from '../../core/strict'
import { hashFile } from './runner'
import type { BackupRunner } from './runner'
import { Backup, BackupCreate, ListQuery } from './schema'
import { type BackupStore, backupView } from './store'

/**
 * How long another instance's unfinished backup holds a new one back: an instance that died
 * mid-backup blocks the API for an hour at most, until it restarts and settles its row. This
 * instance's own unfinished backup holds it back however long it runs.
 */
const IN_FLIGHT_WINDOW_MS = 3_600_000
const BUSY = 'a backup is already pending or running: ask again once it finished'

const Envelope = <S extends TSchema>(data: S) => t.Object({ code: t.Integer(), message: t.String(), data })
const Id = t.Object({ id: t.String() })
const tag = (summary: string, description?: string, responses?: Record<number, { description: string }>) => ({
  tags: ['backups'],
  summary,
  ...(description ? { description } : {}),
  ...(responses ? { responses } : {}),
})

const stamp = (ms: number) =>
  new Date(ms)
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z')

/** 409 for a backup whose file is in another instance's (unshared) backup directory. */
function elsewhere(row: { id: string; instance_id: string | null }): Conflict {
  return new Conflict(
    `the file of backup ${row.id} is on instance '${row.instance_id}', whose backup directory this instance does not share: ask that instance`,
    { instance: row.instance_id },
  )
}

export function backupRoutes(ctx: PluginContext<unknown>, store: BackupStore, runner: BackupRunner) {
  const audit = auditor(ctx)
  return new Elysia({ name: 'backups' })
    .use(ctx.guard)
    .model({ 'backups.Backup': Backup })
    .post(
      '/api/v1/backups',
      async ({ body, set, principal, request, server }) => {
        if (body.driver !== undefined && body.driver !== runner.driver)
          throw invalidField(
            'body.driver',
            `'${body.driver}' is not this server's store, which is ${runner.driver}`,
          )
        // One at a time: each is a whole copy of the store, and an operator's loop of requests
        // filled the disk (12 copies of a 59 MB store in 5 s), failing every write after it.
        if (await store.busy(IN_FLIGHT_WINDOW_MS)) throw new Conflict(BUSY)
        const low = await runner.lowSpace()
        if (low) throw new HttpError(507, 'insufficient_storage', low)
        // Checked again with the insert, as one step: requests at once all passed the first check.
        const row = await store.claim(IN_FLIGHT_WINDOW_MS, {
          name: body.name ?? 'backup',
          type: body.type ?? 'full',
          driver: runner.driver,
          trigger: 'api',
        })
        if (!row) throw new Conflict(BUSY)
        void runner.enqueue(row)
        audit({ principal, request, server }, 'backups.create', row.id, {
          name: row.name,
          driver: row.driver,
        })
        set.status = 202
        set.headers.location = `/api/v1/backups/${row.id}`
        return ok(backupView(row))
      },
      {
        permission: 'backups:write',
        // The handler records backups.create; a refused attempt reads the same.
        audit: 'backups.create',
        transform: ({ body }) => rejectUnknown(BackupCreate, body, 'body'),
        body: BackupCreate,
        response: { 202: Envelope(Backup) },
        detail: tag(
          'Start a backup of the connected store in the background (202, status pending)',
          'sqlite: a consistent online copy (VACUUM INTO on its own thread); postgres: pg_dump --format=plain --no-owner (password in the environment). ' +
            'Backups run one at a time: pending -> running -> succeeded (location, size, sha256 checksum) or failed (error). Poll GET /api/v1/backups/{id}. ' +
            "409 while one is pending or running (this instance's, or another's started within the hour).",
          {
            409: { description: 'a backup is already pending or running' },
            507: {
              description: 'too little free space where backups go (twice the last backup, at least 256 MB)',
            },
          },
        ),
      },
    )
    .get(
      '/api/v1/backups',
      async ({ query }) => {
        const items = (await store.list(query.status)).map(backupView)
        return ok({ items, total: items.length })
      },
      {
        permission: 'backups:read',
        query: ListQuery,
        response: { 200: Envelope(t.Object({ items: t.Array(Backup), total: t.Integer() })) },
        detail: tag('List backups, newest first (filter: status)'),
      },
    )
    .get('/api/v1/backups/:id', async ({ params }) => ok(backupView(await store.get(params.id))), {
      permission: 'backups:read',
      params: Id,
      response: { 200: Envelope(Backup) },
      detail: tag('Read one backup record'),
    })
    .get(
      '/api/v1/backups/:id/download',
      async ({ params, principal, request, server }) => {
        // A backup file holds every secret the store keeps (channel credentials, key and password
        // hashes) that the API masks: only an admin takes one away.
        if (!principal?.roles.includes('admin'))
          throw new Forbidden('downloading a backup needs the admin role: the file holds every stored secret')
        const row = await store.get(params.id)
        if (row.status !== 'succeeded' || !row.location)
          throw new Conflict(`backup ${row.id} is ${row.status}: only a succeeded backup has a file`)
        if (!runner.reachable(row)) throw elsewhere(row)
        const path = join(runner.dir, row.location)
        if (!existsSync(path)) throw new HttpError(410, 'gone', `the file of backup ${row.id} is missing`)
        const f = await hashFile(path)
        if (f.sha256 !== row.checksum || f.size !== Number(row.size))
          throw new HttpError(
            500,
            'checksum_mismatch',
            `the file of backup ${row.id} does not match its record (sha256 ${f.sha256}, ${f.size} bytes; recorded ${row.checksum}, ${row.size} bytes)`,
          )
        audit({ principal, request, server }, 'backups.download', row.id, { name: row.name, size: f.size })
        const ext = row.driver === 'sqlite' ? 'sqlite' : 'sql'
        const filename = `liveops-${row.name.replace(/[^A-Za-z0-9._-]/g, '_')}-${stamp(Number(row.created_at))}.${ext}`
        return new Response(Bun.file(path), {
          headers: {
            'content-type': row.driver === 'sqlite' ? 'application/vnd.sqlite3' : 'application/sql',
            'content-length': String(f.size),
            'content-disposition': `attachment; filename="${filename}"`,
            'x-checksum-sha256': f.sha256,
            'repr-digest': `sha-256=:${Buffer.from(f.sha256, 'hex').toString('base64')}:`,
          },
        })
      },
      {
        permission: 'backups:read',
        params: Id,
        detail: tag(
          'Download a succeeded backup file, verified against its recorded sha256 and size first',
          'Admins only (403 for other roles): the file holds the secrets the API masks. ' +
            '409 while pending or running and for a failed backup, and on an instance that lacks the file (the backup directory is not shared): the message and `data.instance` name the instance that has it; ' +
            '410 when the file is gone; 500 `checksum_mismatch` when the file changed since it was written. ' +
            'The answer carries X-Checksum-Sha256 and Repr-Digest.',
          {
            200: { description: 'The backup file (application/vnd.sqlite3 or application/sql)' },
            409: {
              description:
                'The backup is pending, running or failed (it has no file), or its file is on another instance (`data.instance`)',
            },
            410: { description: 'The file of the backup is missing' },
            500: { description: 'checksum_mismatch: the file changed since it was written' },
          },
        ),
      },
    )
    .delete(
      '/api/v1/backups/:id',
      async ({ params, principal, request, server }) => {
        const row = await store.get(params.id)
        if (row.status === 'pending' || row.status === 'running')
          throw new Conflict(`backup ${row.id} is ${row.status}; delete it once it finished`)
        // Removing only the record would leave the file on the other instance for ever.
        if (row.location && !runner.reachable(row)) throw elsewhere(row)
        await runner.remove(row)
        audit({ principal, request, server }, 'backups.delete', row.id, { name: row.name })
        return ok(null)
      },
      {
        permission: 'backups:write',
        audit: { action: 'backups.delete', target: '{id}' },
        params: Id,
        detail: tag(
          'Delete a backup record and its file (409 while pending or running, and on an instance that lacks the file: `data.instance` names the one that has it)',
        ),
      },
    )
}

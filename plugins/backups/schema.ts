import { t } from 'elysia'

export const BackupCreate = t.Object(
  {
    name: t.Optional(
      t.String({
        minLength: 1,
        maxLength: 100,
        pattern: '^[A-Za-z0-9][A-Za-z0-9 ._-]*$',
        description: 'Label of the backup (letters, digits, space, . _ -); absent: `backup`',
      }),
    ),
    type: t.Optional(t.Literal('full', { description: 'Only `full` (the whole connected store) exists' })),
    driver: t.Optional(
      t.String({
        description:
          'The store driver the caller expects (sqlite, postgres, mysql); refused with 400 when it is not the connected store.',
      }),
    ),
  },
  { additionalProperties: false },
)

export const Status = t.Union(
  [t.Literal('pending'), t.Literal('running'), t.Literal('succeeded'), t.Literal('failed')],
  { description: 'pending -> running -> succeeded | failed' },
)

export const Backup = t.Object({
  id: t.String(),
  name: t.String(),
  type: t.String(),
  driver: t.Union([t.Literal('sqlite'), t.Literal('postgres'), t.Literal('mysql')]),
  trigger: t.Union([t.Literal('api'), t.Literal('schedule')]),
  status: Status,
  location: t.Optional(
    t.String({ description: 'File name under DATA_DIR/backups (or plugins.backups.dir)' }),
  ),
  size: t.Optional(t.Integer({ description: 'Bytes' })),
  checksum: t.Optional(t.String({ description: 'sha256 of the file, lower-case hex' })),
  error: t.Optional(t.String()),
  createdAt: t.String({ format: 'date-time' }),
  startedAt: t.Optional(t.String({ format: 'date-time' })),
  completedAt: t.Optional(t.String({ format: 'date-time' })),
  instance: t.Optional(
    t.String({
      description:
        'The instance that made the backup: it settles it and keeps its file (every instance reads it when the backup directory is shared)',
    }),
  ),
})

export const ListQuery = t.Object({ status: t.Optional(Status) })

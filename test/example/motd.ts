import { Elysia, t } from 'elysia'
import { NotFound, invalidField } from '../../core/http'
import { definePlugin } from '../../core/plugin'
import { Secret, SecretUrl, maskSecrets } from '../../core/secrets'

/**
 * The example plugin of `docs/plugins.md`: a message of the day per game. Small, but it uses
 * every extension point a plugin has, and `test/core/contract.test.ts` checks each one.
 */
const Settings = t.Object(
  {
    /** Shown when a game has no message yet. `MOTD_GREETING` overrides it (the `env` field). */
    greeting: t.String({ default: 'Welcome back!' }),
    /** A secret setting: every read masks it (`Secret`). */
    translate_key: Secret(t.String({ default: '' })),
    /** A URL whose password and query values are secret (`SecretUrl`). */
    archive_url: SecretUrl(t.String({ default: '' })),
    /** Lets a test turn the health check down. */
    healthy: t.Boolean({ default: true }),
  },
  { additionalProperties: false, default: {} },
)

/** What the start and stop hooks did, in order (the contract test reads it). */
export const lifecycle: string[] = []

const Message = t.Object({ gameId: t.String(), text: t.String(), postedBy: t.String(), at: t.String() })

export default definePlugin({
  name: 'motd',
  // Its service use is checked against this list: `games` only.
  dependsOn: ['games'],
  config: Settings,
  env: { MOTD_GREETING: 'greeting' },
  migrations: [
    {
      id: 1,
      name: 'motd',
      sql: 'CREATE TABLE motd_messages (game_id TEXT PRIMARY KEY, text TEXT NOT NULL, posted_by TEXT NOT NULL, at BIGINT NOT NULL)',
    },
  ],
  // An unusual grant on purpose: analysts write messages, operators only read them.
  permissions: { motd: { write: ['analyst'] } },
  // Its routes answer the analytics error body instead of the /api/v1 envelope.
  errors: [{ prefix: '/api/v1/motd', body: 'analytics' }],
  setup(ctx) {
    const games = ctx.service('games')
    const posts = ctx.metrics.counter('svc_motd_posts_total', 'Messages of the day posted', ['game_id'])
    const count = async () =>
      Number((await ctx.db.get<{ n: number | string }>('SELECT COUNT(*) AS n FROM motd_messages'))?.n ?? 0)
    ctx.health('motd', async () =>
      ctx.config.healthy
        ? { status: 'up', messages: await count() }
        : { status: 'down', error: 'told to be down' },
    )
    const post = async (gameId: string, text: string, by: string) => {
      await ctx.db.run(
        'INSERT INTO motd_messages (game_id, text, posted_by, at) VALUES (?, ?, ?, ?) ON CONFLICT (game_id) DO UPDATE SET text = excluded.text, posted_by = excluded.posted_by, at = excluded.at',
        [gameId, text, by, Date.now()],
      )
      posts.inc({ game_id: gameId })
    }
    // A consumer: an expired certificate becomes every game's message (it never imports the producer).
    ctx.bus.on('certificate_expired', async (e) => {
      for (const g of new Set((await games.environments()).map((env) => env.gameId)))
        await post(g, `Maintenance: ${e.domain} is being renewed`, 'certificates')
    })
    ctx.onStart(() => {
      lifecycle.push('start')
    })
    ctx.onStop(() => {
      lifecycle.push('stop')
    })
    ctx.provide('motd', { messages: count })

    return new Elysia({ name: 'motd' })
      .use(ctx.guard)
      .put(
        '/api/v1/motd/:gameId',
        async ({ params, body, principal }) => {
          if (!(await games.gameExists(params.gameId)))
            throw new NotFound(`game '${params.gameId}' not found`)
          if (body.text.includes('<')) throw invalidField('body.text', 'must not contain markup')
          await post(params.gameId, body.text, principal.username)
          // A producer: other plugins (notify, rules) route it; this plugin never imports them.
          await ctx.bus.emit('alert.fired', {
            alert_id: `motd:${params.gameId}`,
            source: 'motd',
            level: 'info',
            title: 'Message of the day changed',
            body: body.text,
            params: { game_id: params.gameId },
            at: new Date().toISOString(),
          })
          return { gameId: params.gameId, text: body.text }
        },
        {
          permission: 'motd:write',
          body: t.Object(
            { text: t.String({ minLength: 1, maxLength: 280 }) },
            { additionalProperties: false },
          ),
          detail: { tags: ['motd'], summary: 'Set a game message of the day' },
        },
      )
      .get(
        '/api/v1/motd/:gameId',
        async ({ params }) => {
          const row = await ctx.db.get<{ text: string; posted_by: string; at: number }>(
            'SELECT text, posted_by, at FROM motd_messages WHERE game_id = ?',
            [params.gameId],
          )
          return {
            gameId: params.gameId,
            text: row?.text ?? ctx.config.greeting,
            postedBy: row?.posted_by ?? 'default',
            at: new Date(row?.at ?? 0).toISOString(),
          }
        },
        {
          permission: 'motd:read',
          response: { 200: Message },
          detail: { tags: ['motd'], summary: 'A game message of the day' },
        },
      )
      .get('/api/v1/motd-settings', () => maskSecrets(Settings, ctx.config), {
        permission: 'motd:read',
        detail: { tags: ['motd'], summary: 'The plugin settings, secrets masked' },
      })
  },
})

declare module '../../core/plugin' {
  interface Services {
    motd: { messages(): Promise<number> }
  }
}

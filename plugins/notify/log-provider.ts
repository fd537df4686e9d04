import { Type as T } from '@sinclair/typebox'
import { defineProvider } from '../../core/plugin'

/** The built-in `log` provider: writes each delivery to the service log (demos, smoke tests, benches). */
export const logProvider = defineProvider({
  type: 'log',
  config: T.Object(
    { level: T.Optional(T.Union([T.Literal('debug'), T.Literal('info'), T.Literal('warn')])) },
    { additionalProperties: false },
  ),
  create(settings, { log }) {
    const level = settings.level ?? 'info'
    return {
      async send(d) {
        log[level]('notification', {
          id: d.id,
          channel: d.provider,
          level: d.level,
          title: d.title,
          targets: d.targets,
          recipients: d.recipients,
        })
        return { ok: true }
      },
    }
  },
})

import { type Static, Type as T, type TLiteral, type TUnion } from '@sinclair/typebox'
import { invalidField } from '../../core/http'
import { Secret, SecretUrl } from '../../core/secrets'
import { MAX_SECRET, MAX_URL } from './keys'

const UnionEnum = <const V extends readonly string[]>(values: V, opts: Record<string, unknown> = {}) =>
  T.Union(
    values.map((v) => T.Literal(v)),
    opts,
  ) as unknown as TUnion<TLiteral<V[number]>[]>

/**
 * The events routed to channels (spec 3 section 6). Spec 3's approval flow events are left out
 * until something produces them (no approval center exists).
 */
export const EVENTS = [
  'alert.fired',
  'certificate_expiring',
  'certificate_expired',
  'function.invoked',
] as const
export type RoutedEvent = (typeof EVENTS)[number]

/** The channels of the site settings, addressable by these ids in rules. */
export const BUILTIN = ['inapp', 'chatbot', 'webhook', 'email'] as const

export const Routing = T.Object(
  {
    channels: T.Array(
      T.Object(
        {
          id: T.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$' }),
          type: UnionEnum(['webhook', 'chatbot'] as const, {
            description: 'webhook: signed JSON POST; chatbot: the chat robot, signed as the site chat robot',
          }),
          // As the site keys' (keys.ts): every routed notification reads the routing.
          url: SecretUrl(T.String({ pattern: '^https?://.+', maxLength: MAX_URL })),
          secret: T.Optional(Secret(T.String({ maxLength: MAX_SECRET }))),
        },
        { additionalProperties: false },
      ),
      { maxItems: 50 },
    ),
    rules: T.Array(
      T.Object(
        {
          event: UnionEnum(EVENTS),
          channels: T.Array(T.String({ minLength: 1 }), { minItems: 1, uniqueItems: true }),
          thresholdDays: T.Optional(
            T.Integer({
              minimum: 0,
              description: 'certificate events: only when days_left is at most this',
            }),
          ),
        },
        { additionalProperties: false },
      ),
      { maxItems: 200 },
    ),
  },
  { additionalProperties: false },
)
export type Routing = Static<typeof Routing>

/** What the schema cannot say: channel ids are unique and not builtin; rules name known channels. */
export function checkRouting(r: Routing): void {
  const ids = new Set<string>(BUILTIN)
  r.channels.forEach((c, i) => {
    if (ids.has(c.id))
      throw invalidField(
        `body.channels[${i}].id`,
        (BUILTIN as readonly string[]).includes(c.id) ? 'is a built-in channel id' : 'is used twice',
      )
    ids.add(c.id)
  })
  r.rules.forEach((rule, i) =>
    rule.channels.forEach((c, j) => {
      if (!ids.has(c))
        throw invalidField(
          `body.rules[${i}].channels[${j}]`,
          `unknown channel '${c}'; known: ${[...ids].join(', ')}`,
        )
    }),
  )
}

export const EMPTY_ROUTING: Routing = { channels: [], rules: [] }

import {
  type Static,
  Type as T,
  type TLiteral,
  type TOptional,
  type TSchema,
  type TUnion,
} from '@sinclair/typebox'
import { Secret, SecretUrl } from '../../core/secrets'

const UnionEnum = <const V extends readonly string[]>(values: V) =>
  T.Union(values.map((v) => T.Literal(v))) as unknown as TUnion<TLiteral<V[number]>[]>
/**
 * Lengths of the text keys: a URL as browsers and proxies keep one, a host name as DNS has it, an
 * address as SMTP has it, a secret well past any signing key or password. Every routed notification
 * reads them (an operator's four 9 MB values had held the event loop 2.5 s under 20 notifications).
 */
export const MAX_URL = 2_048
export const MAX_HOST = 253
export const MAX_ADDRESS = 320
export const MAX_SECRET = 1_024
const Url = T.String({
  pattern: '^(https?://.+)?$',
  maxLength: MAX_URL,
  description: 'http(s) URL; empty turns the channel off',
})
const Text = (maxLength: number, description?: string) =>
  T.String({ maxLength, ...(description ? { description } : {}) })

/** Recipients of one notification mail (`emailTo`), as notify caps one delivery. */
export const MAX_MAIL_RECIPIENTS = 1_000

/**
 * Every `notification.*` key of spec 3 with its schema and default. Secret ones are marked so
 * every read and the audit log mask them. `emailTo` is ours: the spec names no recipients.
 */
export const KEYS = {
  inAppEnabled: { schema: T.Boolean(), default: true },
  chatbotUrl: { schema: SecretUrl(Url), default: '' },
  chatbotSecret: { schema: Secret(Text(MAX_SECRET)), default: '' },
  webhookUrl: { schema: SecretUrl(Url), default: '' },
  webhookSecret: { schema: Secret(Text(MAX_SECRET)), default: '' },
  emailEnabled: { schema: T.Boolean(), default: false },
  smtpHost: { schema: Text(MAX_HOST, 'the SMTP server: a host name or address'), default: '' },
  smtpPort: {
    schema: T.Union([T.Integer({ minimum: 1, maximum: 65535 }), T.String({ pattern: '^[0-9]{1,5}$' })], {
      description: '465 with ssl, 587 with starttls; a number or a string of digits',
    }),
    default: 587,
  },
  smtpUser: { schema: Text(MAX_ADDRESS), default: '' },
  smtpPassword: { schema: Secret(Text(MAX_SECRET)), default: '' },
  smtpFrom: { schema: Text(MAX_ADDRESS, 'the sender address'), default: '' },
  smtpEncryption: { schema: UnionEnum(['none', 'ssl', 'starttls'] as const), default: 'starttls' },
  smtpAuthType: { schema: UnionEnum(['plain', 'login'] as const), default: 'plain' },
  smtpInsecureSkipVerify: { schema: T.Boolean(), default: false },
  emailTo: {
    // At most MAX_MAIL_RECIPIENTS: an operator's 40,000 held the event loop 12 s at each send.
    schema: T.String({
      description: `comma-separated recipients of notification mail, at most ${MAX_MAIL_RECIPIENTS}`,
      maxLength: 64_000,
      pattern: `^[^,]*(,[^,]*){0,${MAX_MAIL_RECIPIENTS - 1}}$`,
    }),
    default: '',
  },
} as const satisfies Record<string, { schema: TSchema; default: unknown }>

export type KeyName = keyof typeof KEYS
export const KEY_NAMES = Object.keys(KEYS) as KeyName[]
export const PREFIX = 'notification.'

/** One schema over every key, for masking a whole snapshot or an audit entry. */
export const SettingsSchema = T.Object(
  Object.fromEntries(KEY_NAMES.map((k) => [k, T.Optional(KEYS[k].schema)])) as {
    [K in KeyName]: TOptional<(typeof KEYS)[K]['schema']>
  },
  { additionalProperties: false },
)
export type Settings = { [K in KeyName]: Static<(typeof KEYS)[K]['schema']> }

/** `plugins.site` of the YAML: the file values (origin `file`). */
export const SiteConfig = T.Object(
  {
    notification: T.Object(SettingsSchema.properties, { additionalProperties: false, default: {} }),
    /** Per-request timeout of webhook and chat robot sends. */
    send_timeout_ms: T.Integer({ minimum: 1, default: 10_000 }),
    /**
     * In-app message streams one caller (a user) holds open at once in this process; beyond: 429
     * naming it (one viewer's thousands of streams each cost a socket and a timer).
     */
    max_streams_per_principal: T.Integer({ minimum: 1, maximum: 1_000_000, default: 16 }),
    /**
     * How often each instance checks the settings' revision, dropping its copy of the settings and
     * routing when another instance changed them and its notice was lost (a notice drops it at once).
     */
    sync_ms: T.Integer({ minimum: 10, default: 1_000 }),
    /** In-app messages older than this many days are deleted (daily), read or not; 0 keeps them forever. */
    message_retention_days: T.Integer({ minimum: 0, default: 90 }),
  },
  { additionalProperties: false, default: {} },
)
export type SiteConfig = Static<typeof SiteConfig>

export const DEFAULTS = Object.fromEntries(KEY_NAMES.map((k) => [k, KEYS[k].default])) as Settings

/**
 * The site secret that is sent to a destination: the SMTP password goes to the SMTP host and port
 * (the signing secrets never leave the server: they sign what is sent).
 */
const SENT_TO = {
  smtpPassword: [
    'smtpHost',
    'smtpPort',
    'smtpEncryption',
    'smtpInsecureSkipVerify',
    'smtpUser',
    'smtpAuthType',
  ],
} as const satisfies Partial<Record<KeyName, KeyName[]>>

type Entries = Record<KeyName, { value: unknown; origin: string }>

/**
 * Why a change of `key` (from `before` to `after`) would send a stored secret somewhere it was
 * not entered for, or undefined. A secret is kept only for its destination: a password from the
 * YAML goes only to the YAML's host, port, encryption, certificate check, user and mechanism; one
 * set through the API only to those it was set with (as a notify channel's SMTP password, so an
 * operator cannot turn off the encryption and read the YAML's password off the wire). To move the
 * destination, set the password to "" first, then enter it again.
 */
export function secretMoved(key: KeyName, before: Entries, after: Entries): string | undefined {
  for (const [secret, dests] of Object.entries(SENT_TO) as [KeyName, readonly KeyName[]][]) {
    if (key !== secret && !dests.includes(key)) continue
    if (!after[secret].value) continue
    const enteredNow = key === secret && after[secret].origin === 'override'
    if (enteredNow) continue
    const moved =
      after[secret].origin === 'override'
        ? dests.filter((d) => JSON.stringify(before[d].value) !== JSON.stringify(after[d].value))
        : dests.filter((d) => after[d].origin === 'override')
    if (moved.length)
      return `enter the secret again: ${PREFIX}${secret} was entered for another ${moved.map((d) => PREFIX + d).join(' and ')}; set it to "" first, change the destination, then set it again`
  }
  return undefined
}

import { Type as T } from '@sinclair/typebox'
import { t } from 'elysia'
import { Secret } from '../../core/secrets'

// Body numbers use TypeBox's own Integer: Elysia's t.Integer also accepts a numeric string.

export const Status = t.Union(
  [t.Literal('active'), t.Literal('expiring'), t.Literal('expired'), t.Literal('unknown')],
  {
    description:
      'active: expiry beyond the threshold; expiring: inside it; expired: past expiry; unknown: never parsed',
  },
)

/** A DNS name or an IP address: what SNI and the name check take. */
const Domain = t.String({
  minLength: 1,
  maxLength: 253,
  pattern: '^(\\*\\.)?[A-Za-z0-9_]([A-Za-z0-9_.:-]*[A-Za-z0-9_])?$',
  description: 'DNS name (or IP address) the certificate is for; the SNI name of a probe',
})
const Port = T.Integer({ minimum: 1, maximum: 65535, description: 'TLS port, default 443' })
const Threshold = T.Integer({ minimum: 1, maximum: 3650 })

export const CertificateCreate = t.Object(
  {
    domain: Domain,
    port: t.Optional(Port),
    address: t.Optional(
      t.String({
        minLength: 1,
        maxLength: 255,
        description:
          'Host or IP a probe connects to when it differs from the domain (a backend behind DNS); the domain stays the SNI name',
      }),
    ),
    certificate: t.Optional(
      t.String({
        minLength: 1,
        maxLength: 262_144,
        description:
          'PEM certificate (leaf first, chain after). Absent: the certificate is read by a live TLS probe, now and on every check',
      }),
    ),
    // Secret: an audit entry of a refused registration (409, 400) records the body as declared.
    privateKey: t.Optional(
      Secret(
        t.String({
          minLength: 1,
          maxLength: 262_144,
          description:
            'PEM private key, checked to match the certificate (400 when not) and then discarded: only hasPrivateKey is kept',
        }),
      ),
    ),
    thresholdDays: t.Optional(
      T.Integer({
        minimum: 1,
        maximum: 3650,
        description: 'Expiring window in days (default from the plugin settings, 30)',
      }),
    ),
    enabled: t.Optional(t.Boolean({ description: 'Included in check-all (default true)' })),
  },
  { additionalProperties: false },
)

const CertFields = {
  id: t.String(),
  domain: t.String(),
  port: t.Integer(),
  address: t.Optional(t.String()),
  source: t.Union([t.Literal('manual'), t.Literal('probe')], {
    description: 'manual: the PEM given at registration; probe: read from the server on each check',
  }),
  status: Status,
  subject: t.Optional(t.String()),
  issuer: t.Optional(t.String()),
  commonName: t.Optional(t.String()),
  sans: t.Array(t.String()),
  serialNumber: t.Optional(t.String()),
  fingerprint256: t.Optional(t.String()),
  algorithm: t.Optional(t.String()),
  chainLength: t.Integer({ description: 'Certificates after the leaf' }),
  validFrom: t.Optional(t.String({ format: 'date-time' })),
  validTo: t.Optional(t.String({ format: 'date-time' })),
  daysLeft: t.Optional(
    t.Integer({ description: 'Whole days to expiry at read time; negative once expired' }),
  ),
  thresholdDays: t.Integer(),
  hasPrivateKey: t.Boolean(),
  enabled: t.Boolean(),
  lastChecked: t.Optional(t.String({ format: 'date-time' })),
  error: t.Optional(t.String({ description: 'Why the last parse or probe failed' })),
  createdAt: t.String({ format: 'date-time' }),
  updatedAt: t.String({ format: 'date-time' }),
}
export const Certificate = t.Object(CertFields)
export const CertificateWithPem = t.Object({ ...CertFields, certificate: t.Optional(t.String()) })

export const ListQuery = t.Object({
  status: t.Optional(Status),
  domain: t.Optional(t.String({ minLength: 1 })),
})
export const ExpiringQuery = t.Object({
  days: t.Optional(t.Numeric({ minimum: 1, maximum: 3650, multipleOf: 1 })),
})
export const DomainInfoQuery = t.Object({
  domain: Domain,
  port: t.Optional(t.Numeric({ minimum: 1, maximum: 65535, multipleOf: 1 })),
  address: t.Optional(t.String({ minLength: 1, maxLength: 255 })),
})

const ChainEntry = t.Object({
  subject: t.String(),
  issuer: t.String(),
  serialNumber: t.String(),
  fingerprint256: t.String(),
  validFrom: t.String({ format: 'date-time' }),
  validTo: t.String({ format: 'date-time' }),
})
export const DomainInfo = t.Object({
  domain: t.String(),
  port: t.Integer(),
  subject: t.String(),
  issuer: t.String(),
  commonName: t.Optional(t.String()),
  sans: t.Array(t.String()),
  serialNumber: t.String(),
  fingerprint256: t.String(),
  algorithm: t.String(),
  validFrom: t.String({ format: 'date-time' }),
  validTo: t.String({ format: 'date-time' }),
  daysLeft: t.Integer(),
  selfSigned: t.Boolean(),
  authorized: t.Boolean({ description: 'The chain verifies against the system roots' }),
  authorizationError: t.Optional(t.String()),
  hostnameMatches: t.Boolean({ description: 'The leaf covers the domain (SANs, then CN)' }),
  protocol: t.Optional(t.String()),
  chain: t.Array(ChainEntry, { description: 'Certificates the server sent after the leaf' }),
  certificate: t.String({ description: 'The PEM the server sent, leaf first' }),
})

export const Stats = t.Object({
  total: t.Integer(),
  active: t.Integer(),
  expiring: t.Integer(),
  expired: t.Integer(),
  unknown: t.Integer(),
})

export const CheckAllResult = t.Object({
  checked: t.Integer(),
  durationMs: t.Number(),
  stats: Stats,
})

export const AlertCreate = t.Object(
  {
    domain: Domain,
    thresholdDays: t.Optional(Threshold),
    active: t.Optional(t.Boolean()),
  },
  { additionalProperties: false },
)
export const AlertUpdate = t.Object(
  { thresholdDays: t.Optional(Threshold), active: t.Optional(t.Boolean()) },
  { additionalProperties: false },
)
export const Alert = t.Object({
  id: t.String(),
  domain: t.String(),
  thresholdDays: t.Integer(),
  active: t.Boolean(),
  lastTriggeredAt: t.Optional(t.String({ format: 'date-time' })),
  lastEvent: t.Optional(t.String({ description: 'certificate_expiring or certificate_expired' })),
  createdAt: t.String({ format: 'date-time' }),
  updatedAt: t.String({ format: 'date-time' }),
})

import type { TSchema } from '@sinclair/typebox'
import { Elysia, t } from 'elysia'
import { auditor } from '../../core/audit'
import { iso } from '../../core/db'
import { HttpError, invalidField, ok } from '../../core/http'
import type { Outbound } from '../../core/outbound'
import type { PluginContext } from '../../core/plugin'
import { rejectUnknown } from '../../core/strict'
import {
  Alert,
  AlertCreate,
  AlertUpdate,
  Certificate,
  CertificateCreate,
  CertificateWithPem,
  CheckAllResult,
  DomainInfo,
  DomainInfoQuery,
  ExpiringQuery,
  ListQuery,
  Stats,
} from './schema'
import type { CertService } from './service'
import { type CertStore, MAX_ALERTS, MAX_CERTIFICATES, alertView, certView, certWithPem } from './store'
import { type CertInfo, ProbeError, daysLeft, keyMismatch, parsePem, probe } from './x509'

const DAY_MS = 86_400_000

export interface CertSettings {
  probe_timeout_ms: number
  default_threshold_days: number
}

const Envelope = <S extends TSchema>(data: S) => t.Object({ code: t.Integer(), message: t.String(), data })
const Id = t.Object({ id: t.String() })
const tag = (summary: string, description?: string) => ({
  tags: ['certificates'],
  summary,
  ...(description ? { description } : {}),
})

const withResponses = <D extends object>(detail: D, responses: Record<number, { description: string }>) => ({
  ...detail,
  responses,
})

const chainView = (c: CertInfo) => ({
  subject: c.subject,
  issuer: c.issuer,
  serialNumber: c.serialNumber,
  fingerprint256: c.fingerprint256,
  validFrom: iso(c.validFrom)!,
  validTo: iso(c.validTo)!,
})

async function liveInfo(
  outbound: Outbound,
  domain: string,
  port: number,
  timeoutMs: number,
  address?: string,
) {
  try {
    const p = await probe(outbound, domain, port, timeoutMs, address)
    const i = p.info
    return {
      domain,
      port,
      subject: i.subject,
      issuer: i.issuer,
      commonName: i.commonName,
      sans: i.sans,
      serialNumber: i.serialNumber,
      fingerprint256: i.fingerprint256,
      algorithm: i.algorithm,
      validFrom: iso(i.validFrom)!,
      validTo: iso(i.validTo)!,
      daysLeft: daysLeft(i.validTo),
      selfSigned: i.selfSigned,
      authorized: p.authorized,
      authorizationError: p.authorizationError,
      hostnameMatches: p.hostnameMatches,
      protocol: p.protocol ?? undefined,
      chain: p.chain.map(chainView),
      certificate: p.pem,
    }
  } catch (e) {
    if (e instanceof ProbeError)
      // The caller named a target that does not answer TLS: their input, not this server, failed.
      // One code whether it timed out or was refused: the answers make no port scanner.
      throw new HttpError(422, 'probe_failed', e.message)
    throw e
  }
}

export function certRoutes(
  ctx: PluginContext<unknown>,
  settings: CertSettings,
  store: CertStore,
  svc: CertService,
) {
  const audit = auditor(ctx)
  return new Elysia({ name: 'certificates' })
    .use(ctx.guard)
    .model({ 'certificates.Certificate': Certificate, 'certificates.Alert': Alert })
    .post(
      '/api/v1/certificates',
      async ({ body, set, principal, request, server }) => {
        const port = body.port ?? 443
        const thresholdDays = body.thresholdDays ?? settings.default_threshold_days
        // Text that is no certificate is refused, not stored: each was kept whole (256 KB) as unknown.
        if (body.certificate !== undefined) {
          const parsed = parsePem(body.certificate)
          if (!parsed.ok) throw invalidField('body.certificate', parsed.error)
        }
        let hasPrivateKey = false
        if (body.privateKey !== undefined) {
          if (body.certificate === undefined)
            throw invalidField(
              'body.privateKey',
              'needs body.certificate: a key is only checked against a given certificate',
            )
          const why = keyMismatch(body.certificate, body.privateKey)
          if (why) throw invalidField('body.privateKey', why)
          hasPrivateKey = true
        }
        const source = body.certificate === undefined ? 'probe' : 'manual'
        await store.room()
        // A target the outbound policy refuses is refused now, not stored to fail every check.
        if (source === 'probe') await ctx.outbound.refuseEarly(body.address ?? body.domain)
        const outcome = await svc.inspect({
          source,
          pem: body.certificate ?? null,
          domain: body.domain,
          port,
          address: body.address ?? null,
          threshold_days: thresholdDays,
        })
        const row = await store.insert({
          domain: body.domain,
          port,
          address: body.address,
          source,
          hasPrivateKey,
          thresholdDays,
          enabled: body.enabled ?? true,
          outcome,
        })
        await svc.evaluateAlerts(new Set([row.domain]))
        audit({ principal, request, server }, 'certificates.register', `${row.domain}:${row.port}`, {
          id: row.id,
          source,
          status: row.status,
          hasPrivateKey,
        })
        set.status = 201
        return ok(certWithPem(row))
      },
      {
        permission: 'certificates:write',
        // Each write's handler records certificates.*; a refused attempt reads the same.
        audit: 'certificates.register',
        transform: ({ body }) => rejectUnknown(CertificateCreate, body, 'body'),
        body: CertificateCreate,
        response: { 201: Envelope(CertificateWithPem) },
        detail: tag(
          'Register a certificate from the form (PEM) or, without a PEM, from a live TLS probe',
          [
            'A PEM that does not parse is 400 naming `body.certificate`, nothing stored; a probe that fails is still registered: status unknown with the reason in `error`, so a later check can succeed.',
            'A private key is checked against the certificate (400 `body.privateKey` when it does not match) and is never stored.',
            `409 when domain and port are already registered, or past ${MAX_CERTIFICATES} certificates.`,
          ].join(' '),
        ),
      },
    )
    .get(
      '/api/v1/certificates',
      async ({ query }) => {
        const items = (await store.list(query)).map((r) => certView(r))
        return ok({ items, total: items.length })
      },
      {
        permission: 'certificates:read',
        query: ListQuery,
        response: { 200: Envelope(t.Object({ items: t.Array(Certificate), total: t.Integer() })) },
        detail: tag('List certificates (filters: status, domain), by domain and port'),
      },
    )
    .get(
      '/api/v1/certificates/domain-info',
      async ({ query }) =>
        ok(
          await liveInfo(
            ctx.outbound,
            query.domain,
            query.port ?? 443,
            settings.probe_timeout_ms,
            query.address,
          ),
        ),
      {
        permission: 'certificates:write',
        query: DomainInfoQuery,
        response: { 200: Envelope(DomainInfo) },
        detail: withResponses(
          tag(
            'Read a server certificate by a live TLS handshake (10 s timeout) to prefill the form',
            'Needs certificates:write: it is the helper of the registration form, and it makes the server connect where the caller says. ' +
              'The domain is the SNI name and the name checked; `address` connects elsewhere when given. Untrusted, expired and wrong-host certificates are shown, ' +
              'with `authorized`, `authorizationError` and `hostnameMatches` saying what is wrong. 422 when no handshake completes (the message says why: name not found, refused, timed out).',
          ),
          {
            400: { description: 'outbound_refused: the outbound policy does not allow the target' },
            422: {
              description:
                'probe_failed: no TLS handshake with the target (one answer whether it refused, reset or timed out)',
            },
          },
        ),
      },
    )
    .get(
      '/api/v1/certificates/expiring',
      async ({ query }) => {
        const now = Date.now()
        const rows =
          query.days === undefined
            ? await store.withStatus('expiring')
            : await store.expiringBefore(now, now + query.days * DAY_MS)
        const items = rows.map((r) => certView(r, now))
        return ok({ items, total: items.length })
      },
      {
        permission: 'certificates:read',
        query: ExpiringQuery,
        response: { 200: Envelope(t.Object({ items: t.Array(Certificate), total: t.Integer() })) },
        detail: tag(
          'Certificates in status expiring (as of their last check), soonest first',
          'With `days`: every certificate not yet expired whose stored expiry falls within that many days, whatever its threshold.',
        ),
      },
    )
    .get('/api/v1/certificates/stats', async () => ok(await stats(store)), {
      permission: 'certificates:read',
      response: { 200: Envelope(Stats) },
      detail: tag('Counts by status (active, expiring, expired, unknown) and the total'),
    })
    .post(
      '/api/v1/certificates/check-all',
      async ({ principal, request, server }) => {
        const run = await svc.checkAll()
        audit({ principal, request, server }, 'certificates.check_all', 'certificates', {
          checked: run.checked,
        })
        return ok({ ...run, stats: await stats(store) })
      },
      {
        permission: 'certificates:write',
        audit: { action: 'certificates.check_all', target: 'certificates' },
        response: { 200: Envelope(CheckAllResult) },
        detail: tag(
          'Re-check every enabled certificate (probes run concurrently, bounded) and evaluate the alert rules',
          'Also runs on the schedule of `plugins.certificates.check_interval_s` (daily by default). One run at a time in a process: a call while one is under way (another call, the schedule) waits for it and answers its result.',
        ),
      },
    )
    .post(
      '/api/v1/certificates/alerts',
      async ({ body, set, principal, request, server }) => {
        const row = await store.insertAlert({
          domain: body.domain,
          thresholdDays: body.thresholdDays ?? 30,
          active: body.active ?? true,
        })
        await svc.evaluateAlerts(new Set([row.domain]))
        audit({ principal, request, server }, 'certificates.alert_create', row.domain, {
          id: row.id,
          thresholdDays: Number(row.threshold_days),
          active: !!Number(row.active),
        })
        set.status = 201
        return ok(alertView(await store.getAlert(row.id)))
      },
      {
        permission: 'certificates:write',
        audit: 'certificates.alert_create',
        transform: ({ body }) => rejectUnknown(AlertCreate, body, 'body'),
        body: AlertCreate,
        response: { 201: Envelope(Alert) },
        detail: tag(
          `Create an alert rule (thresholdDays default 30, active default true); 409 past ${MAX_ALERTS} rules`,
          'On every check the rule raises `certificate_expiring` once when the soonest certificate of its domain enters the window, and `certificate_expired` once when it expires; ' +
            'lastTriggeredAt holds the last trigger. A renewed certificate opens a new window. The rule is evaluated once at creation against the stored certificates.',
        ),
      },
    )
    .get(
      '/api/v1/certificates/alerts',
      async ({ query }) => ok((await store.listAlerts(query)).map(alertView)),
      {
        permission: 'certificates:read',
        query: t.Object({ domain: t.Optional(t.String({ minLength: 1 })) }),
        response: { 200: Envelope(t.Array(Alert)) },
        detail: tag('List alert rules (filter: domain)'),
      },
    )
    .put(
      '/api/v1/certificates/alerts/:id',
      async ({ params, body, principal, request, server }) => {
        const row = await store.updateAlert(params.id, body)
        audit({ principal, request, server }, 'certificates.alert_update', row.domain, {
          id: row.id,
          ...body,
        })
        return ok(alertView(row))
      },
      {
        permission: 'certificates:write',
        audit: 'certificates.alert_update',
        params: Id,
        transform: ({ body }) => rejectUnknown(AlertUpdate, body, 'body'),
        body: AlertUpdate,
        response: { 200: Envelope(Alert) },
        detail: tag('Change a rule threshold or switch; fields not given stay as they are'),
      },
    )
    .delete(
      '/api/v1/certificates/alerts/:id',
      async ({ params, principal, request, server }) => {
        await store.removeAlert(params.id)
        audit({ principal, request, server }, 'certificates.alert_delete', params.id)
        return ok(null)
      },
      {
        permission: 'certificates:write',
        audit: { action: 'certificates.alert_delete', target: '{id}' },
        params: Id,
        detail: tag('Delete an alert rule'),
      },
    )
    .get('/api/v1/certificates/:id', async ({ params }) => ok(certWithPem(await store.get(params.id))), {
      permission: 'certificates:read',
      params: Id,
      response: { 200: Envelope(CertificateWithPem) },
      detail: tag('Read a certificate with its PEM'),
    })
    .delete(
      '/api/v1/certificates/:id',
      async ({ params, principal, request, server }) => {
        const row = await store.get(params.id)
        await store.remove(params.id)
        audit({ principal, request, server }, 'certificates.delete', `${row.domain}:${row.port}`, {
          id: row.id,
        })
        return ok(null)
      },
      {
        permission: 'certificates:write',
        audit: 'certificates.delete',
        params: Id,
        detail: tag('Delete a certificate'),
      },
    )
    .post(
      '/api/v1/certificates/:id/check',
      async ({ params, principal, request, server }) => {
        const row = await svc.check(params.id)
        audit({ principal, request, server }, 'certificates.check', `${row.domain}:${row.port}`, {
          id: row.id,
          status: row.status,
        })
        return ok(certWithPem(row))
      },
      {
        permission: 'certificates:write',
        audit: 'certificates.check',
        params: Id,
        response: { 200: Envelope(CertificateWithPem) },
        detail: tag(
          'Re-check one certificate (spec 3 state rules) and evaluate the alert rules of its domain',
          'A probe-sourced entry is read again from its server; when the probe fails the stored certificate still decides the status and `error` says why.',
        ),
      },
    )
}

async function stats(store: CertStore) {
  const c = await store.counts()
  return { total: c.active + c.expiring + c.expired + c.unknown, ...c }
}

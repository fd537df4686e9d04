import { Elysia } from 'elysia'
import type { auditor } from '../../core/audit'
import type { RulesRouteDeps } from './routes'

const tags = (tag: string, summary: string, description: string) => ({
  tags: [`notify ${tag}`],
  summary,
  description,
})

/**
 * `POST /api/v1/callbacks/chatcard` (spec 2; plugins/rules/chatcard.ts): no Bearer token, the chat
 * platform proves itself. Its own file for the OpenAPI prose it carries.
 */
export function chatcardRoute(d: RulesRouteDeps, audit: ReturnType<typeof auditor>) {
  return new Elysia({ name: 'rules.chatcard' }).use(d.ctx.guard).post(
    '/api/v1/callbacks/chatcard',
    async ({ headers, request, server }) => {
      // The raw bytes: Lark's signature covers them as sent (bounded to 64 KB by `bodyLimits`).
      const r = await d.callback(await request.bytes(), headers)
      if (r.ack)
        audit(
          { request, server },
          'alert.ack',
          `alert:${r.ack.alert_id}`,
          { source: 'chatcard' },
          {
            kind: 'chatcard',
            name: r.ack.acked_by,
          },
        )
      return r.answer
    },
    {
      // What the handler records (no caller here is a principal: a refusal is not recorded).
      audit: 'alert.ack',
      parse: 'none',
      detail: {
        ...tags(
          'alerts',
          'Chat-card callback (Lark/Feishu): url_verification echoes the challenge; a confirm button acknowledges its alert',
          'No Bearer token: the chat platform proves itself. 501 (and nothing changes) while neither plugins.rules.chatcard.encrypt_key nor verification_token is configured. ' +
            'An encrypted body {encrypt} must decrypt with the key (AES-256-CBC, key SHA-256 of it, IV the first 16 bytes); a plaintext one is taken only with a configured verification_token it carries (token, or header.token); ' +
            'with both configured, the decrypted body carries the token too. Anything else is 401; an encrypted body without a configured key is 501. ' +
            'With encrypt_key configured, X-Lark-Signature is checked over the raw body before it is parsed or decrypted: hex SHA-256 of X-Lark-Request-Timestamp + X-Lark-Request-Nonce + encrypt_key + body ' +
            "(or, with verification_token configured, the 1.0 card request URL form: hex SHA-1 with the token in the key's place); a wrong one is 401, and a callback that acts without one is 401 " +
            'unless plugins.rules.chatcard.require_signature is false (default true; Lark signs no url_verification, which still needs the key). ' +
            'Confirm ({action: {value: {alert_id}}}) answers {alert_id, acknowledged, acked_by}; 404 when no incident or escalation names the alert; 503 without the ack store. ' +
            'A callback whose time (header.create_time, else X-Lark-Request-Timestamp) is more than 5 minutes off is 401 callback_stale naming it; a confirm needs a time. ' +
            "A confirm's header.event_id (else X-Lark-Request-Nonce) is taken once on every instance: a copy within 10 minutes answers {code: 0, message: 'already handled', data: {alert_id, duplicate: true}} and acknowledges nothing. " +
            'Bodies over 64 KB are refused with 413 before they are read.',
        ),
        security: [],
        // Read as raw bytes (the signature covers them), so described here rather than by a schema.
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: {
                type: 'object',
                additionalProperties: true,
                description:
                  '{encrypt} (encrypted), {type: url_verification, challenge, token?}, or a card action ({action: {value: {alert_id, action?}}, open_id, token?}; the 2.0 shape {schema, header, event})',
              },
            },
          },
        } as never,
        responses: {
          401: {
            description:
              'The callback did not prove itself (no token, wrong token, does not decrypt, a wrong X-Lark-Signature, or none on a callback that acts while an encrypt key is set), or its time is more than 5 minutes off or missing from a confirm (callback_stale)',
          },
          200: {
            description: 'Challenge echoed, alert acknowledged, or a confirm already handled (duplicate)',
          },
          400: {
            description:
              'The callback time is not a number (names header.create_time or X-Lark-Request-Timestamp); the body is not JSON',
          },
          404: { description: 'The alert was never raised' },
          413: { description: 'The body is over 64 KB' },
          501: { description: 'No encrypt key or verification token configured' },
        },
      },
    },
  )
}

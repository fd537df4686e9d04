import { describe, expect, test } from 'bun:test'
import { issue } from './testing'
import { MAX_CHAIN, parsePem } from './x509'

describe('reading a PEM text', () => {
  test('the leaf first, its chain after; blocks found in one pass', () => {
    const c = issue(['pem.example'], 30)
    const parsed = parsePem(`junk before\n${c.chain}\ntrailing`)
    expect(parsed.ok && [parsed.info.commonName, parsed.chain.length]).toEqual(['pem.example', 1])
  })

  test('BEGIN lines without an END are no block, and more than MAX_CHAIN certificates are refused', () => {
    // 200,000 BEGIN lines: a lazy pattern from each to the end of the text was quadratic.
    const opened = '-----BEGIN CERTIFICATE-----'.repeat(200_000)
    expect(parsePem(opened)).toEqual({
      ok: false,
      error: 'no PEM certificate block (-----BEGIN CERTIFICATE-----) found',
    })
    const cert = issue(['many.example'], 30).cert
    expect(parsePem(cert.repeat(MAX_CHAIN)).ok).toBe(true)
    expect(parsePem(cert.repeat(MAX_CHAIN + 1))).toEqual({
      ok: false,
      error: `more than ${MAX_CHAIN} certificates in one PEM text`,
    })
  })
})

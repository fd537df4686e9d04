import { expect, test } from 'bun:test'
import type { Principal } from '../../core/auth/service'
import { whileTrusted } from '../../core/auth/while-trusted'
import { Unauthorized } from '../../core/http'
import { until } from '../helpers'

// core/auth/while-trusted.ts: a long answer's credential checked again until the client leaves.
const viewer: Principal = { kind: 'user', id: 'u1', username: 'u1', roles: ['viewer'] }

test('fires once the credential stops verifying (expired, signed out, disabled), and checks no more', async () => {
  let checks = 0
  let valid = true
  const auth = {
    identify: () => {
      checks++
      return valid ? viewer : Promise.reject(new Unauthorized('missing, invalid or expired token'))
    },
    authorize: (p: Principal | undefined) => p!,
  }
  const signal = whileTrusted(auth, { headers: {}, gone: new AbortController().signal }, 'analytics:read', 10)
  await until(async () => checks >= 3)
  expect(signal.aborted).toBe(false)
  valid = false
  await until(async () => signal.aborted)
  const after = checks
  await Bun.sleep(50)
  expect(checks).toBe(after)
})

test('fires when the permission is gone (a role taken away); stops checking once the client left', async () => {
  let allowed = true
  const auth = {
    identify: () => viewer,
    authorize: (p: Principal | undefined) => {
      if (!allowed) throw new Error("permission 'analytics:read' required")
      return p!
    },
  }
  const demoted = whileTrusted(
    auth,
    { headers: {}, gone: new AbortController().signal },
    'analytics:read',
    10,
  )
  allowed = false
  await until(async () => demoted.aborted)
  allowed = true
  let checks = 0
  const gone = new AbortController()
  const counting = {
    identify: () => {
      checks++
      return viewer
    },
    authorize: (p: Principal | undefined) => p!,
  }
  whileTrusted(counting, { headers: {}, gone: gone.signal }, 'analytics:read', 10)
  await until(async () => checks >= 2)
  gone.abort()
  const at = checks
  await Bun.sleep(50)
  expect(checks).toBe(at)
})

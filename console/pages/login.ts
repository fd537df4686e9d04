import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useEffect, useState } from 'preact/hooks'
import { Form, Input } from '../components/form'
import { errorText } from '../components/ui'
import { ApiError } from '../lib/api'
import { signIn, signedOutReason } from '../lib/session'
import { useStore } from '../lib/store'

/** How long the login throttle holds, in words. */
const wait = (s: number) => (s < 90 ? `${s} seconds` : `${Math.ceil(s / 60)} minutes`)

/** Sign-in: email and password; the throttle's answer (429) says how long to wait. */
export function Login(): VNode {
  const reason = useStore(signedOutReason)
  const [email, setEmail] = useState('')
  const [password, setPassword] = useState('')
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<string>()
  useEffect(() => {
    document.title = 'Sign in · liveops'
  }, [])
  const submit = async () => {
    if (!email || !password) return setError('Enter your email and password.')
    setBusy(true)
    setError(undefined)
    try {
      await signIn(email.trim(), password)
    } catch (e) {
      const err = e instanceof ApiError ? e : new ApiError(0, String(e))
      setError(
        err.status === 429
          ? `Too many failed sign-ins: ${err.message}.${err.retryAfter ? ` Wait ${wait(err.retryAfter)} before the next try.` : ''}`
          : err.status === 401
            ? `Wrong email or password. (${err.message})`
            : errorText(err),
      )
      setBusy(false)
    }
  }
  return html`<main class="login" id="main">
    <div class="login-card">
      <h1>Sign in to liveops</h1>
      ${reason && html`<p class="note" role="status">${reason}</p>`}
      <${Form} label="Sign in" onSubmit=${submit}>
        <${Input} label="Email" type="email" value=${email} onValue=${setEmail} autocomplete="username" required />
        <${Input}
          label="Password"
          type="password"
          value=${password}
          onValue=${setPassword}
          autocomplete="current-password"
          required
        />
        ${error && html`<p class="note error" role="alert">${error}</p>`}
        <button type="submit" disabled=${busy}>${busy ? 'Signing in…' : 'Sign in'}</button>
      <//>
      <p class="hint">The session is kept in this tab's memory only: reloading the page signs you out.</p>
    </div>
  </main>`
}

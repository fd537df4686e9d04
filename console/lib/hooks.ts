import { useCallback, useEffect, useRef, useState } from 'preact/hooks'
import { ApiError } from './api'

export interface Loaded<T> {
  data?: T
  error?: ApiError
  loading: boolean
  reload: () => void
}

const asApiError = (e: unknown) =>
  e instanceof ApiError ? e : new ApiError(0, e instanceof Error ? e.message : String(e))

/**
 * Loads `fn` now and whenever `deps` change; an older answer arriving late is dropped. `fn`
 * returning undefined means "nothing to load yet" (no game chosen).
 */
export function useApi<T>(fn: (signal: AbortSignal) => Promise<T> | undefined, deps: unknown[]): Loaded<T> {
  const [state, setState] = useState<{ data?: T; error?: ApiError; loading: boolean }>({ loading: true })
  const [tick, setTick] = useState(0)
  // biome-ignore lint/correctness/useExhaustiveDependencies: deps are the caller's
  useEffect(() => {
    const ctl = new AbortController()
    const p = fn(ctl.signal)
    if (!p) {
      setState({ loading: false })
      return
    }
    setState((s) => ({ data: s.data, loading: true }))
    p.then(
      (data) => !ctl.signal.aborted && setState({ data, loading: false }),
      (e) => !ctl.signal.aborted && setState({ error: asApiError(e), loading: false }),
    )
    return () => ctl.abort()
  }, [...deps, tick])
  const reload = useCallback(() => setTick((n) => n + 1), [])
  return { ...state, reload }
}

export interface Action {
  busy: boolean
  error?: ApiError
  /** What the last success said (`Saved.`). */
  done?: string
  run: (fn: () => Promise<unknown>, done?: string) => Promise<boolean>
  clear: () => void
}

/** A button's work: busy while it runs, the API's message when refused, a short word when done. */
export function useAction(): Action {
  const [s, set] = useState<{ busy: boolean; error?: ApiError; done?: string }>({ busy: false })
  const alive = useRef(true)
  useEffect(
    () => () => {
      alive.current = false
    },
    [],
  )
  const run = useCallback(async (fn: () => Promise<unknown>, done?: string) => {
    set({ busy: true })
    try {
      await fn()
      if (alive.current) set({ busy: false, done })
      return true
    } catch (e) {
      if (alive.current) set({ busy: false, error: asApiError(e) })
      return false
    }
  }, [])
  const clear = useCallback(() => set({ busy: false }), [])
  return { ...s, run, clear }
}

/** Calls `fn` every `ms` while mounted (and `on`). */
export function useInterval(fn: () => void, ms: number, on = true): void {
  const saved = useRef(fn)
  saved.current = fn
  useEffect(() => {
    if (!on) return
    const id = setInterval(() => saved.current(), ms)
    return () => clearInterval(id)
  }, [ms, on])
}

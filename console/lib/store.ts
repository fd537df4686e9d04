import { useEffect, useState } from 'preact/hooks'

/** A value that components follow: `useStore(s)` re-renders them when it changes. */
export class Store<T> {
  private listeners = new Set<(v: T) => void>()
  constructor(private value: T) {}

  get(): T {
    return this.value
  }

  set(value: T): void {
    if (Object.is(value, this.value)) return
    this.value = value
    for (const fn of [...this.listeners]) fn(value)
  }

  update(fn: (v: T) => T): void {
    this.set(fn(this.value))
  }

  subscribe(fn: (v: T) => void): () => void {
    this.listeners.add(fn)
    return () => this.listeners.delete(fn)
  }
}

/** The store's current value; the component re-renders on every change. */
export function useStore<T>(store: Store<T>): T {
  const [value, setValue] = useState(store.get())
  useEffect(() => {
    setValue(store.get())
    return store.subscribe(setValue)
  }, [store])
  return value
}

import type { BusEvents } from './events'

export type { BusEvents }

/**
 * In-process typed events; the events and their payloads are listed in `core/events.ts`.
 * A listener that throws is logged and never breaks the emitter or the other listeners.
 */

type Listener<T> = (payload: T) => void | Promise<void>

export class Bus {
  private listeners = new Map<string, Set<Listener<never>>>()

  constructor(private onError: (event: string, error: unknown) => void = () => undefined) {}

  on<K extends keyof BusEvents & string>(event: K, fn: Listener<BusEvents[K]>): () => void {
    const set = this.listeners.get(event) ?? new Set()
    this.listeners.set(event, set)
    set.add(fn as Listener<never>)
    return () => set.delete(fn as Listener<never>)
  }

  /** Resolves when every listener has finished (or failed). */
  async emit<K extends keyof BusEvents & string>(event: K, payload: BusEvents[K]): Promise<void> {
    const set = this.listeners.get(event)
    if (!set) return
    await Promise.all(
      [...set].map(async (fn) => {
        try {
          await (fn as Listener<BusEvents[K]>)(payload)
        } catch (e) {
          this.onError(event, e)
        }
      }),
    )
  }
}

/**
 * One run at a time of some work, shared: `run` while one is under way answers that one's promise
 * (its callers get the same result), and the first call after it settled starts anew. For work
 * that callers at once would each repeat whole (a check-all probing every target, an evaluation
 * raising alerts, a read of every agent or setting).
 */
export class SingleFlight<T> {
  private current: Promise<T> | undefined

  run(start: () => Promise<T>): Promise<T> {
    this.current ??= start().finally(() => {
      this.current = undefined
    })
    return this.current
  }
}

/**
 * The changes an instance made to (or heard of) some stored state it keeps a copy of in memory.
 * A read of the store that was under way when one happened may be older than it: on PostgreSQL a
 * read waits on the network while the changing request runs. Installing such a read would put
 * back what the change replaced, so `settled` reads again instead.
 */
export class Generation {
  private n = 0

  /** A change was applied to the copy (or the copy was dropped). */
  bump(): void {
    this.n++
  }

  /**
   * `read`, taken again while a change lands during it. `settled` is false when every attempt met
   * one: the caller answers from the last `value` but keeps nothing of it (the next read will).
   */
  async settled<T>(read: () => Promise<T>, attempts = 5): Promise<{ value: T; settled: boolean }> {
    for (let attempt = 1; ; attempt++) {
      const before = this.n
      const value = await read()
      if (before === this.n || attempt >= attempts) return { value, settled: before === this.n }
    }
  }
}

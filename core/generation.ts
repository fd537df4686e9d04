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
   * `read`, taken again while a change lands during it; undefined when every attempt met one
   * (the caller leaves its copy as it is, for the next read).
   */
  async settled<T>(read: () => Promise<T>, attempts = 5): Promise<{ value: T } | undefined> {
    for (let attempt = 0; attempt < attempts; attempt++) {
      const before = this.n
      const value = await read()
      if (before === this.n) return { value }
    }
    return undefined
  }
}

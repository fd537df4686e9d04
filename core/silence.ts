/**
 * Tells a slow server from a silent one (Redis here). Under a burst a server, or this event loop,
 * answers late: that is no outage, and treating it as one (counting budgets locally) admitted
 * every instance's whole local budget on top of the shared one. A server that answered this
 * process nothing at all for `downAfter` windows of `windowMs` in a row while requests waited is
 * down. One window counts once, however many requests wait through it.
 */
export class SilenceWatch {
  private heardAt = performance.now()
  private silent = 0
  private silentAt = 0

  constructor(
    readonly windowMs: number,
    readonly downAfter: number,
    /** Which failures are answers the server sent (an `ERR` reply), so it is not silent. */
    private isReply: (e: unknown) => boolean = (e) => /\bERR|NOSCRIPT/.test(String((e as Error)?.message)),
  ) {}

  /** Notes that the server answered when `p` settles with its reply (or its error). */
  heard<T>(p: Promise<T>): Promise<T> {
    return p.then(
      (v) => {
        this.noted()
        return v
      },
      (e) => {
        if (this.isReply(e)) this.noted()
        throw e
      },
    )
  }

  /**
   * `answer`, however late, unless the server goes silent meanwhile (then it throws, naming how
   * long), or `gaveUp()` says another request declared it down (then undefined).
   */
  async wait<T>(answer: Promise<T>, gaveUp: () => boolean = () => false): Promise<T | undefined> {
    const heard = this.heard(answer).then((v) => ({ v }))
    for (;;) {
      let timer: ReturnType<typeof setTimeout> | undefined
      const tick = new Promise<undefined>((r) => {
        timer = setTimeout(() => r(undefined), this.windowMs)
      })
      const out = await Promise.race([heard, tick]).finally(() => clearTimeout(timer))
      if (out) return out.v
      if (gaveUp()) {
        heard.catch(() => undefined)
        return undefined
      }
      const now = performance.now()
      if (now - this.heardAt >= this.windowMs && now - this.silentAt >= this.windowMs) {
        this.silent++
        this.silentAt = now
      }
      if (this.silent >= this.downAfter) {
        heard.catch(() => undefined)
        throw new Error(`no answer for ${Math.round(now - this.heardAt)} ms`)
      }
    }
  }

  private noted() {
    this.heardAt = performance.now()
    this.silent = 0
  }
}

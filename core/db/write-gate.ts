/**
 * SQLite's one writer across two threads of this process: the event loop's connection and a
 * persist thread's (plugins/ingest/persist/persist-thread.ts) take turns through this gate
 * before every write and transaction, so only one of them writes at a time, as DESIGN asks
 * (no transaction ever waits inside SQLite's busy handler, which sleeps 1-100 ms between
 * tries). It lives in shared memory: both threads hold the same four numbers.
 *
 * When both want it, it goes to the one that did not hold it last (a release hands the turn to
 * the other side), so neither starves the other. The event loop waits for it asynchronously
 * (`Atomics.waitAsync`); nothing here blocks a thread.
 */
const OWNER = 0
const WANT = 1 // WANT + side: 1 while that side waits
const TURN = 3 // the side that goes first when both want it
/** How often a waiter looks again even without a wake-up (a lost notify costs no more than this). */
const RECHECK_MS = 50

/** 1: the event loop; 2: the persist thread. */
export type GateSide = 1 | 2

export class WriteGate {
  private readonly a: Int32Array
  private readonly other: GateSide

  constructor(
    /** The shared memory; a new gate when omitted. */
    readonly buffer: SharedArrayBuffer = new SharedArrayBuffer(16),
    private readonly side: GateSide = 1,
  ) {
    this.a = new Int32Array(buffer)
    this.other = side === 1 ? 2 : 1
  }

  /** Takes the gate if it is free and not the other side's turn; else marks this side waiting. */
  tryTake(): boolean {
    const a = this.a
    Atomics.store(a, WANT + this.side - 1, 1)
    if (this.yields()) return false
    if (Atomics.compareExchange(a, OWNER, 0, this.side) !== 0) return false
    Atomics.store(a, WANT + this.side - 1, 0)
    // The other side may wait for this take (its turn rule saw the gate free).
    Atomics.notify(a, OWNER)
    return true
  }

  /** Whether this side lets the other go first: it waits, and it is its turn. */
  private yields(): boolean {
    return Atomics.load(this.a, WANT + this.other - 1) === 1 && Atomics.load(this.a, TURN) === this.other
  }

  /** Resolves once this side holds the gate. */
  async take(): Promise<void> {
    for (;;) {
      if (this.tryTake()) return
      const owner = Atomics.load(this.a, OWNER)
      // Given back since the try, and not the other side's turn: try again rather than wait.
      if (owner === 0 && !this.yields()) continue
      // Else until the owner changes (a give, or the other side's take, notifies).
      const r = Atomics.waitAsync(this.a, OWNER, owner, RECHECK_MS)
      if (r.async) await r.value
    }
  }

  /** Releases it; the turn passes to the other side. */
  give(): void {
    const a = this.a
    Atomics.store(a, TURN, this.other)
    Atomics.store(a, OWNER, 0)
    Atomics.notify(a, OWNER)
  }

  /** Frees what `side` held or waited for (its thread died holding it). */
  forget(side: GateSide): void {
    const a = this.a
    Atomics.store(a, WANT + side - 1, 0)
    if (Atomics.compareExchange(a, OWNER, side, 0) === side) Atomics.notify(a, OWNER)
  }
}

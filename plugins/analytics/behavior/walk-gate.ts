import type { Principal } from '../../../core/auth/principal'
import { TooManyRequests } from '../../../core/http'
import { CallerSlots } from '../../../core/stream-slots'

/**
 * One raw walk (a paths or funnel read) per caller at a time in this process. A walk over a day of
 * a busy game is seconds of work on the event loop, taken in slices with requests served between
 * them; four of one viewer's at once shared the loop and each answered after ten seconds (the
 * security audit's paths read, two of four reset at Bun's idle timeout). Past one: 429 at once,
 * the read that runs keeps its pace. The admin token is not counted (the rate limit exempts it too).
 */
export class WalkGate {
  private readonly slots = new CallerSlots(
    () => 1,
    () =>
      new TooManyRequests(
        'one paths or funnel read at a time per caller: wait for the one running',
        1,
        'too_many_walks',
        { max_walks: 1, retry_after: 1 },
      ),
  )

  /** Runs `walk` for `who`, or throws 429 `too_many_walks` while another of theirs runs. */
  async run<T>(who: Principal, walk: () => Promise<T>): Promise<T> {
    const release = this.slots.take(who)
    try {
      return await walk()
    } finally {
      release()
    }
  }
}

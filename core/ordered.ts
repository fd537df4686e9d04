import { turn } from './turn'

/**
 * Runs `parts` at once, handing their pages to `each` in part order: a part's pages are held
 * until every part before it is done. The walks of funnels and paths read an id range this way,
 * its parts on several PostgreSQL connections or SQLite threads at the same time.
 */
export async function inPartOrder<P>(
  parts: Array<(emit: (page: P) => void) => Promise<void>>,
  each: (page: P) => void,
): Promise<void> {
  const held: P[][] = parts.map(() => [])
  let current = 0
  /** Whether the current part's pages go straight to `each`: not while its held pages are handed over. */
  let live = true
  const running = parts.map((part, i) =>
    part((page) => (i === current && live ? each(page) : held[i].push(page))),
  )
  // Each is waited for below; a failure of an earlier part must not leave the others unobserved.
  for (const r of running) r.catch(() => undefined)
  for (let i = 0; i < parts.length; i++) {
    current = i
    live = false
    // Held pages a turn of the event loop apart: a part's held pages can be most of a read (a
    // busy day's walk is a hundred pages), each parsed on the loop; handed over in one go they
    // held it a second and more (the security audit's paths read). Pages of this part that come
    // in meanwhile queue behind them.
    for (let k = 0; k < held[i].length; k++) {
      if (k) await turn()
      each(held[i][k])
    }
    held[i] = []
    live = true
    await running[i]
  }
}

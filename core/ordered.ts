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
  const running = parts.map((part, i) => part((page) => (i === current ? each(page) : held[i].push(page))))
  // Each is waited for below; a failure of an earlier part must not leave the others unobserved.
  for (const r of running) r.catch(() => undefined)
  for (let i = 0; i < parts.length; i++) {
    current = i
    for (const page of held[i]) each(page)
    held[i] = []
    await running[i]
  }
}

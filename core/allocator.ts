/**
 * Bun's allocator (its fork of mimalloc) hands pages that fall empty back to the OS 100 ms
 * later. Under ingest load they are needed again at once: on the 2-core machine of the
 * benchmarks the server took 12,000-19,000 page faults a second, each a zeroed page, about a
 * tenth of its CPU. With 1,000 ms (upstream mimalloc's default) the batch benchmark ran 10-15%
 * faster (README, session 7); with -1 (never) about as fast, but the idle binary kept what
 * start-up had freed (141 MB resident against 83).
 *
 * So `serve`, unless the operator chose a MIMALLOC_PURGE_DELAY, executes itself again once, same
 * process id and arguments, with 1,000 ms. The variable is read when the process starts, hence
 * the second start. core/main.ts imports this module first, so nothing else of the server has
 * been evaluated yet (no store opened, no port bound). Where `process.execve` is missing, or for
 * any other command, it does nothing.
 */
const PURGE_DELAY_MS = '1000'

function keepFreedMemory() {
  if (process.env.MIMALLOC_PURGE_DELAY !== undefined || typeof process.execve !== 'function') return
  // A compiled binary's entry is its bundle's virtual path; from source, core/main.ts.
  const compiled = Bun.main.startsWith('/$bunfs/')
  if (!compiled && Bun.main !== `${import.meta.dir}/main.ts`) return
  const cmd = process.argv[2]
  if (cmd !== undefined && cmd !== 'serve' && cmd !== '--config') return
  // A compiled binary's argv[1] is that virtual path, which it must not be given again.
  const args = [process.argv[0], ...process.execArgv, ...process.argv.slice(compiled ? 2 : 1)]
  try {
    process.execve(process.execPath, args, { ...process.env, MIMALLOC_PURGE_DELAY: PURGE_DELAY_MS })
  } catch {
    // Not possible here: run with the allocator's defaults.
  }
}

keepFreedMemory()

export {}

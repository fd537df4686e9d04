/**
 * Bun's allocator (mimalloc) gives memory back to the system 100 ms after it falls free
 * (`purge_delay`), and takes it again with a page fault when next needed. Ingestion frees and
 * takes back hundreds of megabytes a second, so a server made 18,000 page faults a second; on a
 * virtual machine where one costs 11 µs (a firecracker guest, docs/performance.md) that was a
 * fifth of a core, and half the throughput of signed batches. Kept instead, freed memory is
 * reused without a fault: the process stays at its high-water mark, which it reaches again at the
 * next peak anyway.
 *
 * mimalloc reads its settings from the environment once, as the process starts, so the process
 * replaces itself (same pid, arguments and environment) with one that has the setting. A value
 * the operator set, any value, is left alone: `MIMALLOC_PURGE_DELAY=100` restores Bun's default.
 */
export const PURGE_DELAY = 'MIMALLOC_PURGE_DELAY'

/** The arguments that start this very program again: the runtime's flags, the script or binary, its arguments. */
export function ownArgs(
  argv = process.argv,
  execArgv = process.execArgv,
  execPath = process.execPath,
): string[] {
  // A compiled binary's argv[1] is its embedded entry (`/$bunfs/root/liveops`), not an argument.
  const compiled = (argv[1] ?? '').startsWith('/$bunfs/')
  return compiled ? [execPath, ...argv.slice(2)] : [execPath, ...execArgv, ...argv.slice(1)]
}

/** Replaces the process with one that keeps freed memory, unless the setting is there already. */
export function keepFreedMemory(): void {
  if (process.env[PURGE_DELAY] !== undefined) return
  if (typeof process.execve !== 'function' || process.platform === 'win32') return
  process.execve(process.execPath, ownArgs(), { ...process.env, [PURGE_DELAY]: '-1' })
}

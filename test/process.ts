import { readFileSync } from 'node:fs'
import type { Subprocess } from 'bun'

export interface Running {
  proc: Subprocess<'ignore', 'pipe', 'pipe'>
  base: string
  output: () => string
}

/**
 * Starts `cmd` (the server or the compiled binary) with PORT=0 and waits for its "listening"
 * log line, which names the port it got. The environment is this process's, without `unset`,
 * plus `env`.
 */
export async function startServer(
  cmd: string[],
  env: Record<string, string>,
  opts: { cwd?: string; timeoutMs?: number; unset?: string[] } = {},
): Promise<Running> {
  const timeoutMs = opts.timeoutMs ?? 15_000
  const inherited = { ...process.env }
  for (const name of opts.unset ?? []) delete inherited[name]
  const proc = Bun.spawn(cmd, {
    cwd: opts.cwd,
    env: { ...inherited, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  let out = ''
  const decoder = new TextDecoder()
  const pump = async (stream: ReadableStream<Uint8Array>) => {
    const reader = stream.getReader()
    for (;;) {
      const { done, value } = await reader.read()
      if (done) return
      out += decoder.decode(value)
    }
  }
  void pump(proc.stdout)
  void pump(proc.stderr)
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    const m = out.match(/listening on (http:\/\/[^"\s]+)/)
    if (m) return { proc, base: m[1], output: () => out }
    if (proc.exitCode !== null) break
    await Bun.sleep(10)
  }
  proc.kill('SIGKILL')
  throw new Error(`server did not start:\n${out}`)
}

/** A running process's environment, read from /proc (Linux). */
export function environ(pid: number): Record<string, string> {
  const out: Record<string, string> = {}
  for (const entry of readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0')) {
    const eq = entry.indexOf('=')
    if (eq > 0) out[entry.slice(0, eq)] = entry.slice(eq + 1)
  }
  return out
}

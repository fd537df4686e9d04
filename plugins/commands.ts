import { workerCommand } from './notify/worker-cli'

/**
 * CLI commands shipped by plugins (`liveops <name> ...`), beside `serve` and `check-config`.
 * Static imports only, so the compiled binary carries them.
 */
export const commands: Record<string, (args: string[]) => Promise<void>> = {
  worker: workerCommand,
}

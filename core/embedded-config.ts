import { readFileSync } from 'node:fs'
import { parse } from 'yaml'

/**
 * The default configuration (`config/liveops.yaml`) parsed by the same YAML library that reads
 * configuration files. `core/main.ts` imports it as a Bun macro, so the parse runs when the
 * code is bundled (or transpiled) and the binary carries the parsed tree: a cold parse of that
 * file took 30-50 ms of every start (scripts/bench/binary.ts).
 */
export function embeddedConfig(): unknown {
  return parse(readFileSync(`${import.meta.dir}/../config/liveops.yaml`, 'utf8')) ?? {}
}

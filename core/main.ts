#!/usr/bin/env bun
import { keepFreedMemory } from './allocator'

// Before anything else is loaded: the allocator's setting is read once, at the process's start.
if (import.meta.main) {
  keepFreedMemory()
  const { main } = await import('./cli')
  await main(process.argv.slice(2))
}

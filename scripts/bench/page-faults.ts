#!/usr/bin/env bun
/**
 * What one page fault costs on this machine: a fresh 1 GiB buffer touched once every 4 KiB, three
 * times. Bare metal answers well under 1 µs; a virtual machine whose host backs the guest's
 * memory lazily answers 10 µs and more, and there the allocator's setting (core/allocator.ts)
 * decides half of the ingestion throughput (docs/performance.md).
 *
 *   bun scripts/bench/page-faults.ts
 */
const size = 1 << 30
const costs: number[] = []
for (let round = 0; round < 3; round++) {
  const buf = new Uint8Array(size)
  const t = performance.now()
  for (let i = 0; i < size; i += 4096) buf[i] = 1
  costs.push(+(((performance.now() - t) * 1000) / (size / 4096)).toFixed(2))
}
console.log(JSON.stringify({ usPerFault: costs }))

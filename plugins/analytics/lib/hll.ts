/**
 * HyperLogLog with 2^12 registers (standard error 1.04 / sqrt(4096) = 1.6%), linear counting
 * for small cardinalities. Kept per game, environment and minute for the online curve; stored
 * sparse while few registers are set, so a quiet minute costs a few hundred bytes.
 */
const P = 12
const M = 1 << P
const ALPHA = 0.7213 / (1 + 1.079 / M)
/** 2^-rank for every rank a register can hold (at most 32 - P + 1), looked up instead of computed. */
const INVERSE_POWERS = Float64Array.from({ length: 64 }, (_, r) => 2 ** -r)

export class HyperLogLog {
  readonly registers: Uint8Array

  constructor(registers?: Uint8Array) {
    this.registers = registers ?? new Uint8Array(M)
  }

  /** Adds a value; true when a register changed (else the sketch, and its count, are as before). */
  add(value: string): boolean {
    // murmur3 32-bit: the top P bits pick the register, the rest give the rank.
    const h = Bun.hash.murmur32v3(value) >>> 0
    const idx = h >>> (32 - P)
    const rest = (h << P) >>> 0
    const rank = rest === 0 ? 32 - P + 1 : Math.clz32(rest) + 1
    if (rank <= this.registers[idx]) return false
    this.registers[idx] = rank
    return true
  }

  merge(other: HyperLogLog): void {
    for (let i = 0; i < M; i++)
      if (other.registers[i] > this.registers[i]) this.registers[i] = other.registers[i]
  }

  count(): number {
    let sum = 0
    let zeros = 0
    const regs = this.registers
    for (let i = 0; i < M; i++) {
      const r = regs[i]
      sum += INVERSE_POWERS[r]
      if (r === 0) zeros++
    }
    const raw = (ALPHA * M * M) / sum
    if (raw <= 2.5 * M && zeros > 0) return Math.round(M * Math.log(M / zeros))
    return Math.round(raw)
  }

  /** `s:` + base64 of (index hi, index lo, rank) triples while sparse, else `d:` + base64 registers. */
  serialize(): string {
    let set = 0
    for (let i = 0; i < M; i++) if (this.registers[i]) set++
    if (set * 3 < M) {
      const out = new Uint8Array(set * 3)
      let j = 0
      for (let i = 0; i < M; i++) {
        const r = this.registers[i]
        if (!r) continue
        out[j++] = i >> 8
        out[j++] = i & 0xff
        out[j++] = r
      }
      return `s:${Buffer.from(out).toString('base64')}`
    }
    return `d:${Buffer.from(this.registers).toString('base64')}`
  }

  static parse(text: string): HyperLogLog {
    const bytes = new Uint8Array(Buffer.from(text.slice(2), 'base64'))
    if (text.startsWith('d:') && bytes.length === M) return new HyperLogLog(bytes)
    const h = new HyperLogLog()
    if (text.startsWith('s:'))
      for (let j = 0; j + 2 < bytes.length; j += 3) h.registers[(bytes[j] << 8) | bytes[j + 1]] = bytes[j + 2]
    return h
  }
}

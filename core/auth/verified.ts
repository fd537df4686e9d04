import { Generation } from '../generation'

/**
 * Verified credentials (SDK keys, application tokens, server keys) by their hash, unknown ones
 * too (guessing costs no query). A revocation, here or heard from another instance, drops them
 * all (`forget`). A verification whose read of the store was under way when that happened reads
 * again: what it read may be older than the revocation (on PostgreSQL the read waits on the
 * network while the revoking request runs), and keeping it would let the revoked credential work
 * on this instance until the next sync.
 */
export class VerifiedCache<P> {
  private readonly known = new Map<string, P | null>()
  private readonly revocations = new Generation()

  forget(): void {
    this.revocations.bump()
    this.known.clear()
  }

  /** The principal of a credential (undefined: unknown or revoked), from memory or through `read`. */
  async verify(hash: string, read: () => Promise<P | null>): Promise<P | undefined> {
    const hit = this.known.get(hash)
    if (hit !== undefined) return hit ?? undefined
    const { value: p, settled } = await this.revocations.settled(read)
    if (settled) {
      if (this.known.size > 10_000) this.known.clear()
      this.known.set(hash, p)
    }
    return p ?? undefined
  }
}

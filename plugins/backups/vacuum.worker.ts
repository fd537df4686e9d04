import { FFIType, dlopen } from 'bun:ffi'
import { Database } from 'bun:sqlite'
import { closeSync, fsyncSync, openSync, readSync } from 'node:fs'

/*
 * The SQLite copy runs here, on a thread of its own: `VACUUM INTO` is one synchronous call that
 * takes seconds on a large store, and on the event loop it would stall every request. The copy
 * is a consistent snapshot (one read transaction) written to `target`, then synced and hashed.
 */

declare const self: Worker

/**
 * On Linux the nice value belongs to a thread: this one drops to NICE, so on a busy machine the
 * copy takes the CPU requests leave over instead of competing with the event loop for it.
 */
const NICE = 10

function lowerPriority(): void {
  if (process.platform !== 'linux') return
  try {
    const libc = dlopen('libc.so.6', {
      setpriority: { args: [FFIType.i32, FFIType.u32, FFIType.i32], returns: FFIType.i32 },
    })
    libc.symbols.setpriority(0, 0, NICE)
  } catch {
    // Another libc, or no FFI: the copy runs at the normal priority.
  }
}
lowerPriority()

/** `id` is the backup being made: its own row in the copy is closed with `closing` as its error. */
export type VacuumRequest = { file: string; target: string; id: string; closing: string }
export type VacuumReply = { ok: true; size: number; sha256: string } | { ok: false; error: string }

self.onmessage = (m: MessageEvent<VacuumRequest>) => {
  let reply: VacuumReply
  try {
    const db = new Database(m.data.file, { readonly: true })
    try {
      // Another connection may hold a lock for a moment (the writer's checkpoint).
      db.exec('PRAGMA busy_timeout = 10000')
      db.prepare('VACUUM INTO ?').run(m.data.target)
    } finally {
      db.close()
    }
    const copy = new Database(m.data.target)
    try {
      copy
        .prepare("UPDATE backups SET status = 'failed', error = ?, completed_at = started_at WHERE id = ?")
        .run(m.data.closing, m.data.id)
    } finally {
      copy.close()
    }
    const hash = new Bun.CryptoHasher('sha256')
    const fd = openSync(m.data.target, 'r+')
    let size = 0
    try {
      const buf = Buffer.allocUnsafe(1 << 20)
      for (let n = readSync(fd, buf); n > 0; n = readSync(fd, buf)) {
        hash.update(buf.subarray(0, n))
        size += n
      }
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
    reply = { ok: true, size, sha256: hash.digest('hex') }
  } catch (e) {
    reply = { ok: false, error: `sqlite copy failed: ${(e as Error).message}` }
  }
  postMessage(reply)
}

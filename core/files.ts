import { chmodSync, closeSync, existsSync, mkdirSync, openSync, writeFileSync } from 'node:fs'

/*
 * Everything liveops writes holds secrets or data about players: the store, the JWT secret,
 * backups, logs. Its directories are made owner-only (0700) and its files owner-read-write
 * (0600) where they are created, whatever the process umask, and a file found looser (written
 * by an older version) is tightened when it is opened again.
 */

/** Owner only: the mode of every directory liveops creates. */
export const PRIVATE_DIR = 0o700
/** Owner read and write: the mode of every file liveops writes. */
export const PRIVATE_FILE = 0o600

/** Makes `dir` (and missing parents) owner-only; an existing directory is left as its owner set it. */
export function privateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR })
}

/** Creates `path` empty when missing; either way it ends up 0600. */
export function privateFile(path: string): void {
  closeSync(openSync(path, 'a', PRIVATE_FILE))
  chmodSync(path, PRIVATE_FILE)
}

/** Tightens `path` to 0600 when it exists. */
export function tighten(path: string): void {
  if (existsSync(path)) chmodSync(path, PRIVATE_FILE)
}

/** Writes a whole file, 0600 from its first byte. */
export function writePrivate(path: string, data: string): void {
  writeFileSync(path, data, { mode: PRIVATE_FILE })
  chmodSync(path, PRIVATE_FILE)
}

import type { Param } from '../../../core/db'
import type { CommitRows } from './persist'

/**
 * A commit on its way to the persist thread (persist-thread.ts): every value of its row lists,
 * one after another, as a kind per value, a number per value (the value, or a string's length)
 * and all the strings joined into one text. The two typed arrays are transferred, not copied,
 * and the text crosses as one string; the thread cuts the strings back out by their lengths.
 * Encoding the rows as JSON text and parsing it again cost 1.5-3.5 µs an event of the event
 * loop's and the thread's time; this costs a fraction of that (docs/performance.md, ninth session).
 */
export interface WireCommit {
  firstId: number
  receivedAt: number
  /** The values in each list, in `LISTS` order; -1 for a list the commit does not have. */
  sizes: number[]
  kinds: Uint8Array<ArrayBuffer>
  nums: Float64Array<ArrayBuffer>
  text: string
}

const NULL = 0
const NUMBER = 1
const STRING = 2
const TRUE = 3
const FALSE = 4

/** The row lists of a commit, in the order they are laid out. */
const lists = (rows: CommitRows): Array<Param[] | undefined> => [
  rows.events.streams,
  rows.events.cols,
  rows.events.props,
  rows.payments,
  rows.invocations,
  rows.nonces,
  rows.eventIds,
  rows.serverPayments,
  rows.supersede,
]

export function encodeCommit(rows: CommitRows): WireCommit {
  const all = lists(rows)
  let n = 0
  for (const l of all) n += l?.length ?? 0
  const kinds = new Uint8Array(n)
  const nums = new Float64Array(n)
  const strings: string[] = []
  let i = 0
  for (const list of all) {
    if (!list) continue
    for (let k = 0; k < list.length; k++, i++) {
      const v = list[k]
      if (typeof v === 'string') {
        kinds[i] = STRING
        nums[i] = v.length
        strings.push(v)
      } else if (typeof v === 'number') {
        kinds[i] = NUMBER
        nums[i] = v
      } else if (v === null || v === undefined) kinds[i] = NULL
      else if (typeof v === 'boolean') kinds[i] = v ? TRUE : FALSE
      else throw new Error(`persist wire: a ${typeof v} value cannot cross to the persist thread`)
    }
  }
  return {
    firstId: rows.events.firstId,
    receivedAt: rows.events.receivedAt,
    sizes: all.map((l) => (l ? l.length : -1)),
    kinds,
    nums,
    text: strings.join(''),
  }
}

/** The buffers `postMessage` moves instead of copying. */
export const transferables = (w: WireCommit): ArrayBuffer[] => [w.kinds.buffer, w.nums.buffer]

export function decodeCommit(w: WireCommit): CommitRows {
  const { kinds, nums, text } = w
  let i = 0
  let at = 0
  const take = (size: number): Param[] | undefined => {
    if (size < 0) return undefined
    const out: Param[] = new Array(size)
    for (let k = 0; k < size; k++, i++) {
      const kind = kinds[i]
      if (kind === STRING) {
        const end = at + nums[i]
        out[k] = text.slice(at, end)
        at = end
      } else if (kind === NUMBER) out[k] = nums[i]
      else if (kind === NULL) out[k] = null
      else out[k] = kind === TRUE
    }
    return out
  }
  const [streams, cols, props, payments, invocations, nonces, eventIds, serverPayments, supersede] =
    w.sizes.map(take)
  return {
    events: {
      firstId: w.firstId,
      receivedAt: w.receivedAt,
      streams: streams as string[],
      cols: cols!,
      props: props as string[],
    },
    payments: payments!,
    invocations: invocations!,
    nonces,
    eventIds,
    serverPayments,
    supersede,
  }
}

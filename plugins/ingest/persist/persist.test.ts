import { expect, test } from 'bun:test'
import { emptyCommit } from '../testing'
import { type CommitRows, eventParams } from './persist'
import { decodeCommit, encodeCommit, transferables } from './wire'

// The persist thread's wire form of a commit (wire.ts): kinds and numbers in typed arrays, the strings joined.

const commit = (props: string[]): CommitRows => ({
  ...emptyCommit(),
  events: {
    firstId: 5000,
    receivedAt: 1_700_000_000_000,
    streams: ['g1', 'prod', 'g2', 'dev'],
    cols: props.flatMap((_, i) => [
      i % 2,
      `e${i}`,
      1000 + i,
      `u${i}`,
      null,
      i === 1 ? 99 : null,
      null,
      null,
      null,
      null,
      i === 1 ? 'success' : null,
    ]),
    props,
  },
})

test('a commit survives the crossing: strings with NULs, quotes, backslashes, non-Latin text, a lone surrogate and empty ones come back exact', () => {
  const props = [
    JSON.stringify({ a: 'nul \u0000 inside', b: '"quoted" \\ back' }),
    JSON.stringify({ text: 'ゲーム 🎮', n: 1 }),
    '{}',
  ]
  const rows: CommitRows = {
    ...commit(props),
    // Raw NUL, a lone surrogate, an empty string, the largest exact integer, a negative, a fraction, booleans.
    payments: ['g1', 'o\u00001', '\ud800', '', Number.MAX_SAFE_INTEGER, -5, 0.25, true, false, null],
    invocations: [9007199254740991, 'fn', null],
    nonces: ['n1', 1_700_000_060_000],
    eventIds: [0, 'id-0', 2, 'ид-2'],
  }
  const wire = encodeCommit(rows)
  const back = decodeCommit(wire)
  expect(back).toEqual(rows)
  expect(JSON.parse(back.events.props[0]).a).toBe('nul \u0000 inside')
  expect(back.payments[1]).toBe('o\u00001')
  expect(back.payments[2]).toBe('\ud800')
  // Every value is a kind and a number; the strings alone are text.
  expect(wire.kinds.length).toBe(wire.nums.length)
  expect(wire.text.length).toBe(
    [
      ...rows.events.streams,
      ...rows.events.cols,
      ...props,
      ...rows.payments,
      ...rows.invocations,
      ...rows.nonces!,
      ...rows.eventIds!,
    ]
      .filter((v) => typeof v === 'string')
      .reduce((n, v) => n + (v as string).length, 0),
  )
  expect(transferables(wire)).toEqual([wire.kinds.buffer, wire.nums.buffer])
})

test('a commit without raw events, nonces or event ids crosses, and the absent lists stay absent', () => {
  const rows = commit([])
  const back = decodeCommit(encodeCommit(rows))
  expect(back).toEqual(rows)
  expect(back.nonces).toBeUndefined()
  expect(back.eventIds).toBeUndefined()
})

test('a value that cannot cross (a bigint, bytes) is refused, not sent altered', () => {
  expect(() => encodeCommit({ ...commit([]), payments: [1n] })).toThrow('bigint')
  expect(() => encodeCommit({ ...commit([]), payments: [new Uint8Array(1)] })).toThrow('object')
})

test('eventParams expands the compact rows into the table order: ids counting up, shared receive time, each stream named', () => {
  const p = eventParams(commit(['{"x":1}', '{"y":2}']).events)
  expect(p).toEqual(
    [
      [
        5000,
        1_700_000_000_000,
        'g1',
        'prod',
        'e0',
        1000,
        'u0',
        null,
        null,
        null,
        null,
        null,
        null,
        null,
        '{"x":1}',
      ],
      [
        5001,
        1_700_000_000_000,
        'g2',
        'dev',
        'e1',
        1001,
        'u1',
        null,
        99,
        null,
        null,
        null,
        null,
        'success',
        '{"y":2}',
      ],
    ].flat(),
  )
})

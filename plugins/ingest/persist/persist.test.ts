import { expect, test } from 'bun:test'
import { emptyCommit } from '../testing'
import { type CommitRows, decodeCommit, encodeCommit, eventParams } from './persist'

// The persist thread's wire form of a commit: compact raw events, props apart after NULs.

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

test('a commit survives encoding: props with NULs (escaped), quotes, backslashes and non-Latin text come back exact', () => {
  const props = [
    JSON.stringify({ a: 'nul \u0000 inside', b: '"quoted" \\ back' }),
    JSON.stringify({ text: 'ゲーム 🎮', n: 1 }),
    '{}',
  ]
  const rows = commit(props)
  // JSON text never holds a raw NUL: the one inside a value is escaped, so the split is exact.
  expect(props[0]).not.toContain('\u0000')
  const back = decodeCommit(encodeCommit(rows))
  expect(back).toEqual(rows)
  expect(JSON.parse(back.events.props[0]).a).toBe('nul \u0000 inside')
})

test('a commit without raw events encodes and decodes', () => {
  const rows = commit([])
  expect(decodeCommit(encodeCommit(rows))).toEqual(rows)
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

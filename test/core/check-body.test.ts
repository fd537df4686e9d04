import { describe, expect, test } from 'bun:test'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { t } from 'elysia'
import { Invalid } from '../../core/http'
import { checkBody } from '../../core/strict'

/** What checkBody threw: the 400's details. */
function refusal(fn: () => void): { field: string; errors: Array<{ field: string; reason: string }> } {
  try {
    fn()
  } catch (e) {
    expect(e).toBeInstanceOf(Invalid)
    return (e as Invalid & { details: never }).details
  }
  throw new Error('not refused')
}

describe('checkBody on a hostile body', () => {
  const Closed = t.Object({ name: t.String() }, { additionalProperties: false })

  test('names the first 20 issues and reads no further (one per unknown key of a huge body)', () => {
    const check = TypeCompiler.Compile(Closed)
    let read = 0
    const counting = {
      ...check,
      Check: (v: unknown) => check.Check(v),
      Errors: function* (v: unknown) {
        for (const e of check.Errors(v)) {
          read++
          yield e
        }
      },
    } as unknown as typeof check
    const body: Record<string, unknown> = { name: 'x' }
    for (let i = 0; i < 5_000; i++) body[`k${i}`] = i
    const d = refusal(() => checkBody(counting, Closed, body))
    expect(d.errors).toHaveLength(20)
    expect(d.errors[0]).toEqual({ field: 'body.k0', reason: 'unknown field' })
    expect(read).toBe(20)
  })

  test('fills a declared default before judging, and leaves a schema without defaults uncopied', () => {
    const WithDefault = t.Object(
      { name: t.String(), on: t.Boolean({ default: true }) },
      { additionalProperties: false },
    )
    // The default fills the absent `on`: admitted.
    expect(() => checkBody(TypeCompiler.Compile(WithDefault), WithDefault, { name: 'x' })).not.toThrow()
    // Without defaults the body is judged as it is; the caller's object is never changed.
    const body = { name: 1 }
    const d = refusal(() => checkBody(TypeCompiler.Compile(Closed), Closed, body))
    expect(d.field).toBe('body.name')
    expect(body).toEqual({ name: 1 })
  })
})

import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp } from '../../test/helpers'
import { render, renderText } from './templates'

test('renderText fills {{.name}} and {{ .a.b }}; unknown names render empty', () => {
  expect(renderText('{{.a}}-{{ .b.c }}-{{.none}}-{{x}}', { a: 1, b: { c: 'z' } })).toBe('1-z--{{x}}')
  expect(
    render(
      { title: '{{.n}}', body: 'b {{.n}}', level: 'info', fields: [{ label: 'L', value: '{{.m}}' }] },
      { n: 'p' },
      { n: 'd', m: 'm' },
    ),
  ).toEqual({
    title: 'p',
    body: 'b p\nL: m',
    level: 'info',
    fields: [{ label: 'L', value: 'm' }],
  })
})

test("only the data's own names render: inherited ones render empty at every step of a path (audit L5)", () => {
  const vars = { a: { b: 'x' }, list: [1, 2], n: 5 }
  for (const name of ['constructor', '__proto__', 'toString', 'valueOf', 'hasOwnProperty'])
    for (const path of [name, `a.${name}`, `a.b.${name}`, `list.${name}`, `${name}.name`, `a.${name}.name`])
      expect(renderText(`[{{.${path}}}]`, vars), path).toBe('[]')
  expect(renderText('{{.a.b}} {{.list.length}} {{.list}} {{.n}}', vars)).toBe('x 2 [1,2] 5')
  // A name the data itself holds renders, whatever it is called (params arrive as parsed JSON).
  expect(
    renderText('{{.constructor}} {{.__proto__}}', JSON.parse('{"constructor":"c","__proto__":"p"}')),
  ).toBe('c p')
})

test('a rendering is held to what a notification may hold: 400 naming body.params, stopped at the placeholder that passed it', () => {
  const at = (n: number) => ({ title: 't', body: '{{.a}}'.repeat(n), level: 'info', fields: [] })
  // Exactly the most a body may hold renders; one more character does not.
  expect(render(at(5), { a: 'x'.repeat(100_000) }).body).toHaveLength(500_000)
  expect(() => render(at(5), { a: 'x'.repeat(100_001) })).toThrow(
    "body.params: the template's body would be longer than 500,000 characters with these params and data",
  )
  // 5,000 copies of a 100 KB param (an object: rendered as its JSON, 100,002 characters with the
  // quotes): the fifth copy stops it, the rest are never rendered.
  let rendered = 0
  const a = {
    toJSON: () => {
      rendered++
      return 'x'.repeat(100_000)
    },
  }
  expect(() => render(at(5000), { a })).toThrow('body.params')
  expect(rendered).toBe(5)
  // The field lines count with the body, and the title has its own bound.
  const fields = [{ label: '{{.a}}', value: '{{.a}}' }]
  expect(() => render({ ...at(4), fields }, { a: 'x'.repeat(100_000) })).toThrow('body.params')
  expect(() => render({ ...at(0), title: '{{.a}}{{.a}}' }, { a: 'x'.repeat(5_001) })).toThrow(
    "body.params: the template's title would be longer than 10,000 characters",
  )
})

forEachEngine((engine) => {
  let t: TestApp
  beforeAll(async () => {
    t = await makeApp(engine, { plugins: { notify: { auth: { enabled: false } } } })
  })
  afterAll(() => t.stop())

  const tpl = {
    id: 'deploy',
    name: 'Deploy',
    title: 'Deploy {{.service}} {{.version}}',
    level: 'info',
    fields: [{ label: 'By', value: '{{.user}}' }],
    sample_params: { service: 'api', version: '1.2', user: 'ci' },
  }

  test('create, list, get, update, delete', async () => {
    const c = await t.req('POST', '/api/v1/templates/create', { body: tpl })
    expect(c.status).toBe(200)
    expect(c.body.message).toBe('template created')
    expect(c.body.data).toMatchObject({
      id: 'deploy',
      name: 'Deploy',
      title: tpl.title,
      level: 'info',
      fields: tpl.fields,
    })
    const gen = await t.req('POST', '/api/v1/templates/create', { body: { name: 'No id', title: 'x' } })
    expect(gen.body.data.id).toMatch(/^[0-9a-f-]{36}$/)
    const list = await t.req('GET', '/api/v1/templates')
    expect(list.body.data.count).toBe(2)
    expect(list.body.data.templates.map((x: { id: string }) => x.id)).toContain('deploy')
    expect((await t.req('GET', '/api/v1/templates/deploy')).body.data.name).toBe('Deploy')
    const u = await t.req('PUT', '/api/v1/templates/deploy', {
      body: { ...tpl, id: 'ignored', name: 'Deploy v2', level: 'warning' },
    })
    expect(u.body.data).toMatchObject({ id: 'deploy', name: 'Deploy v2', level: 'warning' })
    expect((await t.req('GET', '/api/v1/templates/ignored')).status).toBe(404)
    const del = await t.req('DELETE', `/api/v1/templates/${gen.body.data.id}`)
    expect(del.body).toEqual({ code: 0, message: 'template deleted', data: { id: gen.body.data.id } })
    expect((await t.req('GET', `/api/v1/templates/${gen.body.data.id}`)).status).toBe(404)
  })

  test('preview renders with given params or the sample params', async () => {
    const sample = await t.req('POST', '/api/v1/templates/deploy/preview')
    expect(sample.body.data).toEqual({
      title: 'Deploy api 1.2',
      body: 'By: ci',
      level: 'warning',
      fields: [{ label: 'By', value: 'ci' }],
    })
    const given = await t.req('POST', '/api/v1/templates/deploy/preview', {
      body: { params: { service: 'web', version: '2' }, data: { user: 'ann' } },
    })
    expect(given.body.data.title).toBe('Deploy web 2')
    expect(given.body.data.body).toBe('By: ann')
    const inherited = await t.req('POST', '/api/v1/templates/create', {
      body: { ...tpl, id: 'inherited', title: '{{.constructor}}|{{.__proto__}}|{{.toString}}' },
    })
    expect(inherited.status).toBe(200)
    expect((await t.req('POST', '/api/v1/templates/inherited/preview')).body.data.title).toBe('||')
    expect((await t.req('POST', '/api/v1/templates/none/preview', { body: {} })).status).toBe(404)
    expect((await t.req('POST', '/api/v1/templates/deploy/preview', { body: { params: 'x' } })).status).toBe(
      400,
    )
  })

  test('bad input answers 400 naming the field; duplicate id 409; unknown id 404', async () => {
    const dup = await t.req('POST', '/api/v1/templates/create', { body: tpl })
    expect(dup.status).toBe(409)
    const noName = await t.req('POST', '/api/v1/templates/create', { body: { title: 'x' } })
    expect(noName.status).toBe(400)
    expect(noName.body.message).toContain('body.name')
    const badId = await t.req('POST', '/api/v1/templates/create', {
      body: { id: '-bad id', name: 'n', title: 'x' },
    })
    expect(badId.body.data.field).toBe('body.id')
    const badLevel = await t.req('POST', '/api/v1/templates/create', {
      body: { name: 'n', title: 'x', level: 'loud' },
    })
    expect(badLevel.body.data.field).toBe('body.level')
    const badFields = await t.req('POST', '/api/v1/templates/create', {
      body: { name: 'n', title: 'x', fields: [{ label: 'a' }] },
    })
    expect(badFields.status).toBe(400)
    expect(badFields.body.message).toContain('body.fields[0].value')
    const longLabel = await t.req('POST', '/api/v1/templates/create', {
      body: { name: 'n', title: 'x', fields: [{ label: 'l'.repeat(1_001), value: 'v' }] },
    })
    expect(longLabel.body.data.field).toBe('body.fields[0].label')
    // A template that repeats its params: the preview and a notify through it answer 400, storing nothing.
    const amp = { id: 'amp', name: 'amp', title: 'x', body: '{{.a}}'.repeat(5_000) }
    expect((await t.req('POST', '/api/v1/templates/create', { body: amp })).status).toBe(200)
    // Within the params bound (64 KB), past what its rendering may hold.
    const big = { a: 'y'.repeat(60_000) }
    const preview = await t.req('POST', '/api/v1/templates/amp/preview', { body: { params: big } })
    expect(preview.status).toBe(400)
    expect(preview.body.data).toMatchObject({ field: 'body.params' })
    const before = Number((await t.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM notify_deliveries'))?.n)
    const sent = await t.req('POST', '/api/v1/notify', { body: { type: 't', template: 'amp', params: big } })
    expect(sent.status).toBe(400)
    expect(sent.body.data).toMatchObject({ field: 'body.params' })
    expect(Number((await t.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM notify_deliveries'))?.n)).toBe(
      before,
    )
    expect((await t.req('PUT', '/api/v1/templates/none', { body: tpl })).status).toBe(404)
    expect((await t.req('DELETE', '/api/v1/templates/none')).status).toBe(404)
  })
})

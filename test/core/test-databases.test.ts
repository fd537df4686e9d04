import { expect, test } from 'bun:test'
import { join, relative } from 'node:path'

// Issue 38 point 8: several engineers (and CI jobs) run the suite against one PostgreSQL server at
// once. A test that creates or drops a database by a fixed name drops another run's database under
// it (`DROP DATABASE liveops_test_instances WITH (FORCE)` did), and a test that names the server
// itself ignores TEST_DATABASE_URL. Tests reach PostgreSQL through test/helpers.ts (PG_URL,
// pgUrlWith, scratchDatabase) and name their databases with a random part.

const root = join(import.meta.dir, '../..')

async function testSources(): Promise<{ file: string; text: string }[]> {
  const out: { file: string; text: string }[] = []
  for (const pattern of ['**/*.test.ts', 'test/**/*.ts']) {
    for await (const f of new Bun.Glob(pattern).scan({ cwd: root })) {
      if (f.includes('node_modules/') || out.some((o) => o.file === f)) continue
      out.push({ file: f, text: await Bun.file(join(root, f)).text() })
    }
  }
  return out
}

const self = relative(root, import.meta.path)

test('no test creates or drops a PostgreSQL database by a fixed name', async () => {
  const fixed: string[] = []
  for (const { file, text } of await testSources()) {
    if (file === self) continue
    for (const m of text.matchAll(/(CREATE|DROP) DATABASE (IF EXISTS )?([^\s`'";]+)/g))
      if (!m[3]?.startsWith('${')) fixed.push(`${file}: ${m[0]}`)
    for (const m of text.matchAll(/const \w+ = '(liveops_test_\w+)'/g)) fixed.push(`${file}: ${m[0]}`)
  }
  expect(fixed).toEqual([])
})

test('no test names the PostgreSQL server itself: TEST_DATABASE_URL decides', async () => {
  const hardCoded: string[] = []
  for (const { file, text } of await testSources()) {
    // The test helpers (test/helpers.ts and its PostgreSQL part, test/pg-db.ts) are where it is read.
    if (file === self || file === 'test/helpers.ts' || file === 'test/pg-db.ts') continue
    for (const m of text.matchAll(/postgres(ql)?:\/\/[^`'"\s]*(5432|\/test\b)[^`'"\s]*|port: 5432\b/g))
      hardCoded.push(`${file}: ${m[0]}`)
  }
  expect(hardCoded).toEqual([])
})

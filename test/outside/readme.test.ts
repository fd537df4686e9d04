import { expect, test } from 'bun:test'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { plugins } from '../../plugins'

// Issue 15 point 12: the README is the user's document: short, inside the repository, no lab
// notes, and a few lines for every plugin there is.

const ROOT = join(import.meta.dir, '../..')
const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')

test('at most ~350 lines, no dated notes, nothing outside the repository', () => {
  expect(readme.split('\n').length).toBeLessThanOrEqual(350)
  expect(readme).not.toMatch(/\b20\d\d-\d\d-\d\d\b/)
  expect(readme).not.toMatch(/\bsession \d/i)
  expect(readme).not.toContain('../')
})

test('every relative link resolves to a file of the repository', () => {
  for (const file of [
    'README.md',
    ...['architecture', 'plugins', 'storage', 'benchmarks', 'performance', 'deploy'].map(
      (d) => `docs/${d}.md`,
    ),
  ]) {
    const text = readFileSync(join(ROOT, file), 'utf8')
    const links = [...text.matchAll(/\]\(([^)#\s]+)(#[^)]*)?\)/g)]
      .map((m) => m[1]!)
      .filter((l) => !/^[a-z]+:/.test(l))
    for (const link of links)
      expect(`${file} -> ${link}: ${existsSync(join(ROOT, file, '..', link))}`).toEndWith('true')
  }
})

test('the Plugins section has an entry for every plugin in plugins/index.ts', () => {
  const section = readme.slice(
    readme.indexOf('## Plugins'),
    readme.indexOf('\n## ', readme.indexOf('## Plugins') + 1),
  )
  for (const name of Object.keys(plugins)) expect(section).toContain(`**${name}**`)
})

test('the quick start is two commands, the first needing only Node', () => {
  const quick = readme.slice(readme.indexOf('## Quick start'))
  const block = quick
    .slice(quick.indexOf('```sh') + 5, quick.indexOf('```', quick.indexOf('```sh') + 5))
    .trim()
  const commands = block.split('\n').map((l) => l.replace(/#.*$/, '').trim())
  expect(commands).toEqual(['npm install', "ADMIN_PASSWORD='pick-a-long-one' npm start"])
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'))
  expect(pkg.dependencies.bun).toBeTruthy()
  expect(pkg.scripts.start).toStartWith('bun ')
})

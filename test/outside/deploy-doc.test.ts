import { expect, test } from 'bun:test'

// Issue 38 point 8: docs/deploy.md is followed line by line. systemd takes `#` as a comment only
// at the start of a line: after a value it becomes part of it (`EnvironmentFile=` then names a
// file called "/etc/liveops/secrets.env   # ADMIN_PASSWORD..."). And the unit runs as `liveops`,
// so the steps before it create that user.

const doc = await Bun.file(`${import.meta.dir}/../../docs/deploy.md`).text()
const unit = /```ini\n(# \/etc\/systemd\/system\/liveops\.service\n[\s\S]*?)```/.exec(doc)?.[1] ?? ''

test('the systemd unit has no comment after a value', () => {
  expect(unit).toContain('[Service]')
  const trailing = unit.split('\n').filter((l) => /^[A-Za-z]+=.*\s[#;]/.test(l))
  expect(trailing).toEqual([])
})

test('the liveops user the unit runs as is created before it is used', () => {
  expect(unit).toMatch(/^User=liveops$/m)
  const create = doc.search(/useradd [^\n]*\bliveops\b/)
  const firstUse = doc.search(/-o liveops|User=liveops/)
  expect(create).toBeGreaterThan(-1)
  expect(create).toBeLessThan(firstUse)
})

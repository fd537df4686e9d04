import { expect, test } from 'bun:test'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { issue } from '../../../plugins/certificates/testing'
import { churnCsv } from '../../../plugins/ml/testing'
import { until } from '../../helpers'
import { AGENT_TOKEN, FLOW, type World } from '../world'

/** Operations as an operator: certificates, backups, agents, rate limits, audit; ML models. */
export function opsFlows(w: () => World): void {
  test(
    'certificates by state: register from PEM (expired, expiring, active), filter by state, delete',
    async () => {
      const { tab } = w()
      const page = tab.page
      await tab.signOut()
      await tab.signIn('operator@test.local')
      await tab.go('#/ops/certificates', 'Certificates')
      await page.getByText('No certificate is watched yet.').waitFor()
      const register = async (domain: string, days: number, from?: number) => {
        await page.getByRole('button', { name: 'Register' }).click()
        await page.getByLabel('Domain').fill(domain)
        await page.getByLabel('Certificate (PEM)').fill(issue([domain], days, { fromDays: from }).cert)
        await page.getByRole('button', { name: 'Register', exact: true }).last().click()
        await page.getByRole('cell', { name: new RegExp(`^${domain.replaceAll('.', '\\.')}:443$`) }).waitFor()
      }
      await register('play.starminers.test', 12)
      await register('api.starminers.test', 200)
      await register('old.starminers.test', -3, -120)
      const states = page.getByRole('navigation', { name: 'Certificates by state' })
      await states.getByRole('link', { name: /expiring 1/ }).click()
      await page.getByRole('cell', { name: 'play.starminers.test:443' }).waitFor()
      await page.getByRole('cell', { name: 'api.starminers.test:443' }).waitFor({ state: 'detached' })
      await states.getByRole('link', { name: /All 3/ }).click()
      await page.getByRole('cell', { name: 'old.starminers.test:443' }).waitFor()
      expect(
        await page.getByRole('row').filter({ hasText: 'old.starminers.test' }).getByText('expired').count(),
      ).toBe(1)
      await tab.done('certificates')
      await page.getByRole('button', { name: 'Delete old.starminers.test' }).click()
      await states.getByRole('link', { name: /All 2/ }).waitFor()
    },
    FLOW,
  )

  test(
    'backups: start one, watch it finish, download it (checksum verified by the server), delete',
    async () => {
      const { tab, a } = w()
      const page = tab.page
      await tab.go('#/ops/backups', 'Backups')
      await page.getByText('No backup yet.').waitFor()
      await page.getByRole('button', { name: 'Start a backup' }).click()
      await page.getByText('Backup started.').waitFor()
      await page.getByRole('table', { name: 'Backups' }).getByText('succeeded').waitFor({ timeout: 60_000 })
      const record = (await a.req('GET', '/api/v1/backups', { token: await a.token('admin') })).body.data
        .items[0]
      // The operator runs backups but is offered no download (the file holds every stored secret).
      expect(await page.getByRole('button', { name: /^Download/ }).count()).toBe(0)
      await tab.signOut()
      await tab.signIn('admin@localhost', 'admin-password')
      await tab.go('#/ops/backups', 'Backups')
      const download = page.waitForEvent('download')
      await page.getByRole('button', { name: /^Download/ }).click()
      const file = await download
      const dir = mkdtempSync(join(tmpdir(), 'console-backup-'))
      try {
        await file.saveAs(join(dir, 'backup'))
        expect(readFileSync(join(dir, 'backup')).byteLength).toBe(record.size)
        expect(new Bun.CryptoHasher('sha256').update(readFileSync(join(dir, 'backup'))).digest('hex')).toBe(
          record.checksum,
        )
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
      await tab.done('backups')
      await page.getByRole('button', { name: /^Delete/ }).click()
      await page.getByText('No backup yet.').waitFor()
      await tab.signOut()
      await tab.signIn('operator@test.local')
    },
    FLOW,
  )

  test(
    'agents and a rate-limit rule set previewed against them; the audit log filtered',
    async () => {
      const { tab, base } = w()
      const page = tab.page
      for (const [id, region] of [
        ['gs-eu-1', 'eu'],
        ['gs-eu-2', 'eu'],
        ['gs-us-1', 'us'],
      ]) {
        const res = await fetch(`${base}/api/v1/agents`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-agent-token': AGENT_TOKEN },
          body: JSON.stringify({
            agent_id: id,
            game_id: w().gameId,
            env: 'prod',
            region,
            zone: `${region}-1a`,
            functions: ['match.find'],
            qps: 40,
          }),
        })
        expect(res.status).toBe(201)
      }
      await tab.go('#/ops/agents', 'Agents')
      await page.getByRole('cell', { name: 'gs-us-1', exact: true }).waitFor()
      expect(await page.getByRole('table', { name: 'Agents (3)' }).getByText('online').count()).toBe(3)
      await tab.done('agents')
      // A page at a time, as the API pages: two of three, then the last one, then back.
      await tab.go('#/ops/agents?limit=2', 'Agents')
      await page.getByRole('table', { name: 'Agents (2 of 3)' }).waitFor()
      expect(await page.getByRole('cell', { name: 'gs-us-1', exact: true }).count()).toBe(0)
      await page
        .getByRole('navigation', { name: 'Pages of agents' })
        .getByRole('link', { name: 'Next 2' })
        .click()
      await page
        .getByRole('table', { name: 'Agents (1 of 3)' })
        .getByRole('cell', { name: 'gs-us-1', exact: true })
        .waitFor()
      await page.getByRole('link', { name: 'First page' }).click()
      await page.getByRole('table', { name: 'Agents (2 of 3)' }).waitFor()
      await tab.go('#/ops/agents', 'Agents')
      await page.getByRole('button', { name: 'Unregister gs-us-1' }).click()
      await page.getByText('Unregistered.').waitFor()
      await page.getByRole('table', { name: 'Agents (2)' }).waitFor()

      await tab.go('#/ops/rate-limits', 'Rate limits')
      await page.getByText('No rule set yet.').waitFor()
      await page.getByRole('button', { name: 'New rule set' }).click()
      await page.getByRole('textbox', { name: 'Id', exact: true }).fill('eu-cap')
      await page.getByLabel('Name').fill('EU matchmaking cap')
      await page.getByLabel('QPS').fill('300')
      await page.getByLabel('Percent').fill('50')
      await page.getByLabel('Match region').fill('eu')
      await page.getByRole('button', { name: 'Preview' }).click()
      await page.getByRole('heading', { name: 'Preview: 2 agents matched' }).waitFor()
      const rule = page.getByRole('table', { name: 'Rules against the registered agents' })
      await rule.getByRole('cell', { name: '150' }).waitFor()
      await rule.getByText('gs-eu-1, gs-eu-2').waitFor()
      await page.getByRole('button', { name: 'Save rule set' }).click()
      await page.getByText('Saved.').waitFor()
      await tab.go('#/ops/agents')
      await tab.go('#/ops/rate-limits', 'Rate limits')
      await page.getByRole('button', { name: 'Open EU matchmaking cap' }).waitFor()
      await tab.done('rate-limits')

      await tab.go('#/ops/audit', 'Audit log')
      await page.getByLabel('Action').fill('auth.login')
      await page.getByLabel('Result').selectOption('false')
      await page.getByRole('button', { name: 'Filter' }).click()
      const table = page.getByRole('table', { name: /^Audit entries/ })
      // The filtered page replaces the unfiltered one when it arrives.
      await until(async () => (await table.getByText('ok', { exact: true }).count()) === 0)
      expect(await table.getByText('refused').count()).toBeGreaterThanOrEqual(5)
      await table.getByRole('cell', { name: 'viewer@test.local' }).first().waitFor()
      await tab.done('audit')
    },
    FLOW,
  )

  test(
    'ML: register, upload a CSV and train with progress, the version and its metrics, deploy, predict',
    async () => {
      const { tab } = w()
      const page = tab.page
      await tab.choose('Star Miners')
      await tab.go('#/ml', 'ML models')
      await page.getByText('No model for Star Miners yet.').waitFor()
      await page.getByRole('button', { name: 'New model' }).click()
      await page.getByLabel('Name').fill('Churn in a week')
      await page.getByRole('button', { name: 'Register model' }).click()
      await page.getByRole('heading', { level: 1, name: 'Churn in a week' }).waitFor()
      await page.getByText('Not trained yet.').waitFor()
      const dir = mkdtempSync(join(tmpdir(), 'console-ml-'))
      try {
        writeFileSync(join(dir, 'churn.csv'), churnCsv(600, 11))
        await page.getByLabel('CSV file (header line first)').setInputFiles(join(dir, 'churn.csv'))
        await page.getByText('churn.csv: 600 rows, columns sessions, days_since_purchase, churned').waitFor()
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
      expect(await page.getByLabel('Features').inputValue()).toBe('sessions, days_since_purchase')
      expect(await page.getByLabel('Label').inputValue()).toBe('churned')
      await page.getByRole('button', { name: 'Start training' }).click()
      await page.getByText('Training started.').waitFor()
      await page
        .getByRole('table', { name: 'Versions' })
        .getByText(/accuracy \d+\.\d%/)
        .waitFor({ timeout: 60_000 })
      await page.getByRole('button', { name: 'Deploy' }).click()
      // Created at version 1, the first training makes version 2.
      await page.getByText('Version 2 deployed.').waitFor()
      await page.getByRole('heading', { name: 'Predict' }).waitFor()
      await page.getByLabel('sessions').fill('0.5')
      await page.getByLabel('days_since_purchase').fill('11')
      await page.getByRole('button', { name: 'Predict', exact: true }).click()
      await page.getByText(/^Prediction: (yes|no)/).waitFor()
      await page.getByText(/Probability \d+\.\d% · confidence/).waitFor()
      await tab.done('ml-model')
      await tab.go('#/ml', 'ML models')
      await page.getByRole('link', { name: 'Churn in a week' }).waitFor()
      await tab.done('ml-models')
    },
    FLOW,
  )

  test(
    'a viewer reads models but is offered no training, deploy or prediction, and is refused the backups',
    async () => {
      const { tab } = w()
      const page = tab.page
      await tab.signOut()
      await tab.signIn('viewer@test.local')
      await tab.choose('Star Miners')
      await tab.go('#/ml', 'ML models')
      await page.getByRole('link', { name: 'Churn in a week' }).click()
      await page.getByRole('heading', { level: 1, name: 'Churn in a week' }).waitFor()
      await page.getByRole('table', { name: 'Versions' }).waitFor()
      for (const name of ['Start training', 'Deploy', 'Predict'])
        expect(await page.getByRole('button', { name }).count()).toBe(0)
      await tab.go('#/ops/backups', 'Backups')
      expect(await tab.alert()).toContain("Not allowed. permission 'backups:read' required")
      tab.checkErrors()
    },
    FLOW,
  )
}

import { oneShot, workerUrl } from '../../core/thread'
import type { ModelType } from './algorithms'
import type { CsvBuildReply, CsvScanReply } from './csv.worker'
import type { Built } from './rows'
import type { DatasetConfig } from './schema'

/** The header and the row count (up to one past `maxRows`) of a CSV text, parsed on a thread of its own. */
export const scanCsv = (content: string, maxRows: number) =>
  oneShot<CsvScanReply>(workerUrl('plugins/ml/csv.worker.ts'), { kind: 'scan', content, maxRows })

/** A training's rows (its first `maxRows`) from a dataset's CSV text (`fromCsv`), built on a thread of its own. */
export async function buildCsv(
  type: ModelType,
  cfg: DatasetConfig,
  content: string,
  maxRows: number,
): Promise<Built> {
  const r = await oneShot<CsvBuildReply>(workerUrl('plugins/ml/csv.worker.ts'), {
    kind: 'build',
    type,
    cfg,
    content,
    maxRows,
  })
  if (!r.ok) throw new Error(r.error)
  return r.built
}

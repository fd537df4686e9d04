import { oneShot, workerUrl } from '../../core/thread'
import type { ModelType } from './algorithms'
import type { CsvBuildReply, CsvScanReply } from './csv.worker'
import type { Built } from './dataset'
import type { DatasetConfig } from './schema'

/** The header and the row count of a CSV text, parsed on a thread of its own. */
export const scanCsv = (content: string) =>
  oneShot<CsvScanReply>(workerUrl('plugins/ml/csv.worker.ts'), content)

/** A training's rows from a dataset's CSV text (`fromCsv`), built on a thread of its own. */
export async function buildCsv(type: ModelType, cfg: DatasetConfig, content: string): Promise<Built> {
  const r = await oneShot<CsvBuildReply>(workerUrl('plugins/ml/csv.worker.ts'), {
    kind: 'build',
    type,
    cfg,
    content,
  })
  if (!r.ok) throw new Error(r.error)
  return r.built
}

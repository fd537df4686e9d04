import { oneShot, workerUrl } from '../../core/thread'
import type { CsvScanReply } from './csv.worker'

/** The header and the row count of a CSV text, parsed on a thread of its own. */
export const scanCsv = (content: string) =>
  oneShot<CsvScanReply>(workerUrl('plugins/ml/csv.worker.ts'), content)

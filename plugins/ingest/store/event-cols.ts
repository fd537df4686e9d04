/**
 * The raw event table's columns, one list for the writer and the log's readers: `EVENT_COLS` in
 * the order ingestion writes them (`seq` is given at commit where the engine numbers rows so),
 * `LOG_COLS` in the order the log's readers select them.
 */
export const EVENT_COLS = [
  'id',
  'received_at',
  'game_id',
  'env',
  'event',
  'ts',
  'user_id',
  'session_id',
  'amount_cents',
  'currency',
  'duration_ms',
  'network',
  'level',
  'payment_status',
  'props',
] as const

export const LOG_COLS = ['id', 'seq', ...EVENT_COLS.slice(1)] as const

/**
 * A commit's raw events on the wire (`EventRows.cols` of persist.ts): per event its stream's
 * index, then these columns; the id, receive time, stream and props are said apart.
 */
export const EVENT_WIRE_COLS = EVENT_COLS.slice(4, -1)
export const EVENT_WIRE_WIDTH = 1 + EVENT_WIRE_COLS.length

import { keptKey } from '../../core/digest'

/**
 * An alert id as the incidents, escalations and acknowledgements keep and compare it: itself up to
 * 191 characters (MariaDB/MySQL make these key columns VARCHAR(191), where a longer id failed its
 * incident and escalation with "Data too long"), past that `#` and its SHA-256, on every engine.
 * Longer ids are hashed rather than refused because ids the platform makes itself (ops alerts'
 * `ops-alerts:<rule>:<series labels>`) can pass 191 characters; a caller that sends the long id
 * again (another firing, `status: resolved`, GET or POST /alerts/{id}) reaches the same alert.
 * A trigger key's 50 incidents with 4 MB ids had made one viewer's incident list 210 MB.
 */
export const MAX_ALERT_ID = 191

export const alertKey = (id: string): string => keptKey(id, MAX_ALERT_ID)

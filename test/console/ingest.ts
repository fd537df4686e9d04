import { signRequest } from '../../sdk/sign'
import type { GeneratedEvents } from './events'

/** Sends generated events and payments through signed ingestion, in batches, and checks each answer. */
export async function ingest(
  base: string,
  secret: string,
  data: GeneratedEvents,
  batch = 2000,
): Promise<void> {
  const send = async (path: string, list: Record<string, unknown>[]) => {
    for (let i = 0; i < list.length; i += batch) {
      const body = JSON.stringify(list.slice(i, i + batch))
      const res = await fetch(`${base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(await signRequest(secret, body)) },
        body,
      })
      if (res.status !== 200) throw new Error(`${path}: ${res.status} ${await res.text()}`)
    }
  }
  await send('/api/ingest/events', data.events)
  await send('/api/ingest/payments', data.payments)
}

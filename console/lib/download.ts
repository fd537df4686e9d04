import { raw } from './api'

/**
 * Downloads an authenticated file (a backup, a calendar): the token cannot ride in a link, so
 * the file is fetched with it and handed to the browser as a blob.
 */
export async function download(path: string, fallbackName: string): Promise<void> {
  const res = await raw('GET', path)
  const disposition = res.headers.get('content-disposition') ?? ''
  const name = /filename="?([^";]+)"?/.exec(disposition)?.[1] ?? fallbackName
  const url = URL.createObjectURL(await res.blob())
  const a = document.createElement('a')
  a.href = url
  a.download = name
  document.body.append(a)
  a.click()
  a.remove()
  setTimeout(() => URL.revokeObjectURL(url), 10_000)
}

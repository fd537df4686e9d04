import { basename } from 'node:path'
import type { HTMLBundle } from 'bun'

/** One file of the console as served: its bytes, gzipped once, and its content type. */
export interface Asset {
  bytes: Uint8Array<ArrayBuffer>
  gzipped: Uint8Array<ArrayBuffer>
  type: string
}

/** The console: its page and its assets by name (the name carries the content hash). */
export interface ConsoleFiles {
  page: Asset
  assets: Map<string, Asset>
}

/** Where the page loads its assets from; names carry their content hash, so they never change. */
export const ASSET_PREFIX = '/assets/'

const asset = (bytes: Uint8Array<ArrayBuffer>, type: string): Asset => ({
  bytes,
  gzipped: Bun.gzipSync(bytes, { level: 9 }),
  type,
})

/**
 * Points every `src` and `href` of the page at `/assets/<name>`: the compiled binary's bundle
 * names its files at the root (`/chunk-1a2b.js`), a bundle made from source with the public path.
 */
function relink(html: string, names: ReadonlySet<string>): string {
  return html.replace(/\b(src|href)="([^"]+)"/g, (whole, attr: string, url: string) => {
    const name = basename(url)
    return names.has(name) ? `${attr}="${ASSET_PREFIX}${name}"` : whole
  })
}

function collect(files: Array<{ name: string; bytes: Uint8Array<ArrayBuffer>; type: string }>): ConsoleFiles {
  const html = files.find((f) => f.type.startsWith('text/html'))
  if (!html) throw new Error('the console bundle has no HTML page')
  const others = files.filter((f) => f !== html)
  const names = new Set(others.map((f) => f.name))
  const page = new TextEncoder().encode(relink(new TextDecoder().decode(html.bytes), names))
  return {
    page: asset(page, 'text/html; charset=utf-8'),
    assets: new Map(others.map((f) => [f.name, asset(f.bytes, f.type)])),
  }
}

/**
 * The console's files. The compiled binary carries the bundle Bun made at build time
 * (`bundle.files`); from source, the page is bundled here, once, minified, in memory.
 */
export async function loadConsole(bundle: HTMLBundle): Promise<ConsoleFiles> {
  if (bundle.files?.length) {
    const files = await Promise.all(
      bundle.files.map(async (f) => ({
        name: basename(f.path),
        bytes: new Uint8Array(await Bun.file(f.path).arrayBuffer()),
        type: f.headers['content-type'],
      })),
    )
    return collect(files)
  }
  const built = await Bun.build({
    entrypoints: [bundle.index],
    target: 'browser',
    minify: true,
    publicPath: ASSET_PREFIX,
    naming: { entry: '[name]-[hash].[ext]', chunk: '[name]-[hash].[ext]', asset: '[name]-[hash].[ext]' },
  })
  if (!built.success) throw new AggregateError(built.logs, 'the console did not build')
  const files = await Promise.all(
    built.outputs.map(async (o) => ({
      name: basename(o.path),
      bytes: new Uint8Array(await o.arrayBuffer()),
      type: o.type,
    })),
  )
  return collect(files)
}

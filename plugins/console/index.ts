import { Type as T } from '@sinclair/typebox'
import page from '../../console/index.html'
import { definePlugin } from '../../core/plugin'
import { consoleRoutes } from './routes'

/**
 * The console (issue 37): one web page at `/` for everything a live-ops team does, a client of
 * the public API like any script. Its source is `console/`; Bun bundles it (at build time into
 * the binary, else at the first request) and this plugin serves the page and its hashed assets.
 */
export default definePlugin({
  name: 'console',
  config: T.Object({}, { additionalProperties: false, default: {} }),
  setup(ctx) {
    return consoleRoutes(page, ctx.log)
  },
})

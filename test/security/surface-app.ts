import { type Engine, type MakeAppOptions, makeApp } from '../helpers'

/**
 * The app the surface tests of issue 34 (outbound, masking, callbacks, bounds, audit) drive: the
 * plugins whose routes reach outside, hold secrets or take untrusted input, with the audit log.
 * `plugins` adds to them or changes their settings.
 */
export function surfaceApp(engine: Engine, opts: MakeAppOptions = {}) {
  return makeApp(engine, {
    ...opts,
    plugins: {
      games: {},
      ingest: {},
      ml: { drift_check_minutes: 0 },
      notify: {},
      rules: {},
      rosters: {},
      'webhook-provider': {},
      'smtp-provider': {},
      certificates: {},
      site: {},
      audit: {},
      ...opts.plugins,
    },
  })
}

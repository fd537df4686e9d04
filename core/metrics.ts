import { Counter, Gauge, Histogram, Registry } from 'prom-client'

/**
 * One prom-client registry per app, so two apps in one test process never share series.
 * Plugins create their metrics through these helpers; names carry the `svc_` prefix.
 */
export class Metrics {
  readonly registry = new Registry()
  readonly http: Histogram<'method' | 'route' | 'status'>
  /** Computed at request time (spec 3): set by collectors just before a scrape or JSON read. */
  private collectors: Array<() => Promise<void> | void> = []

  constructor() {
    this.http = this.histogram(
      'svc_http_request_duration_seconds',
      'HTTP request duration by route template',
      ['method', 'route', 'status'],
      [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    )
  }

  counter<L extends string>(name: string, help: string, labelNames: readonly L[] = []) {
    return new Counter<L>({ name, help, labelNames, registers: [this.registry] })
  }

  gauge<L extends string>(name: string, help: string, labelNames: readonly L[] = []) {
    return new Gauge<L>({ name, help, labelNames, registers: [this.registry] })
  }

  histogram<L extends string>(name: string, help: string, labelNames: readonly L[] = [], buckets?: number[]) {
    return new Histogram<L>({ name, help, labelNames, buckets, registers: [this.registry] })
  }

  /** Registers a function that refreshes gauges at read time. */
  collect(fn: () => Promise<void> | void): void {
    this.collectors.push(fn)
  }

  async refresh(): Promise<void> {
    await Promise.all(this.collectors.map((fn) => fn()))
  }

  async text(): Promise<string> {
    await this.refresh()
    return this.registry.metrics()
  }

  /** `{name: value}` of every unlabelled gauge and counter, plus labelled ones as arrays. */
  async json(prefix = 'svc_'): Promise<Record<string, unknown>> {
    await this.refresh()
    const out: Record<string, unknown> = {}
    for (const m of await this.registry.getMetricsAsJSON()) {
      if (!m.name.startsWith(prefix) || String(m.type) === 'histogram') continue
      const values = m.values as Array<{ value: number; labels: Record<string, string | number> }>
      out[m.name] =
        values.length === 1 && Object.keys(values[0].labels).length === 0
          ? values[0].value
          : values.map((v) => ({ labels: v.labels, value: v.value }))
    }
    return out
  }
}

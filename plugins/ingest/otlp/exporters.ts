import { createServer } from 'node:net'
import { Metadata } from '@grpc/grpc-js'
import type { ExportResult } from '@opentelemetry/core'
import { OTLPLogExporter as GrpcLogExporter } from '@opentelemetry/exporter-logs-otlp-grpc'
import { OTLPLogExporter as ProtoLogExporter } from '@opentelemetry/exporter-logs-otlp-proto'
import { OTLPTraceExporter as GrpcTraceExporter } from '@opentelemetry/exporter-trace-otlp-grpc'
import { OTLPTraceExporter as ProtoTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import { CompressionAlgorithm, OTLPExporterBase } from '@opentelemetry/otlp-exporter-base'
import {
  convertLegacyHttpOptions,
  createOtlpHttpExportDelegate,
} from '@opentelemetry/otlp-exporter-base/node-http'
import {
  JsonLogsSerializer,
  JsonTraceSerializer,
  LogsExporterMetricsHelper,
  TraceExporterMetricsHelper,
} from '@opentelemetry/otlp-transformer'
import { resourceFromAttributes } from '@opentelemetry/resources'
import {
  InMemoryLogRecordExporter,
  LoggerProvider,
  type ReadableLogRecord,
  SimpleLogRecordProcessor,
} from '@opentelemetry/sdk-logs'
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base'

/**
 * The real OpenTelemetry JS exporters, for the OTLP tests: each transport and encoding an
 * application may configure. `@opentelemetry/exporter-*-otlp-http` (the JSON encoding) is not
 * installed; its exporter is the same delegate with the JSON serializer, built here the way
 * that package builds it.
 */
export type Transport = 'http/protobuf' | 'http/json' | 'grpc'

/** What the tests vary: the credentials, and gzip (both OTLP transports may compress). */
interface Options {
  headers: Record<string, string>
  gzip?: boolean
}
type HttpConfig = { url: string; headers: Record<string, string>; compression: CompressionAlgorithm }

class JsonLogExporter extends OTLPExporterBase<ReadableLogRecord[]> {
  constructor(config: HttpConfig) {
    super(
      createOtlpHttpExportDelegate(
        convertLegacyHttpOptions(config, 'LOGS', 'v1/logs', { 'Content-Type': 'application/json' }),
        JsonLogsSerializer,
        'otlp_http_log_exporter',
        LogsExporterMetricsHelper,
        undefined,
      ),
    )
  }
}
class JsonTraceExporter extends OTLPExporterBase<ReadableSpan[]> {
  constructor(config: HttpConfig) {
    super(
      createOtlpHttpExportDelegate(
        convertLegacyHttpOptions(config, 'TRACES', 'v1/traces', { 'Content-Type': 'application/json' }),
        JsonTraceSerializer,
        'otlp_http_span_exporter',
        TraceExporterMetricsHelper,
        undefined,
      ),
    )
  }
}

interface Exporter<T> {
  export(items: T, done: (r: ExportResult) => void): void
  shutdown(): Promise<void>
}

const metadataOf = (headers: Record<string, string>) => {
  const m = new Metadata()
  for (const [k, v] of Object.entries(headers)) m.set(k, v)
  return m
}

export function logExporter(
  transport: Transport,
  target: { http: string; grpc: string },
  o: Options,
): Exporter<ReadableLogRecord[]> {
  const compression = o.gzip ? CompressionAlgorithm.GZIP : CompressionAlgorithm.NONE
  if (transport === 'grpc')
    return new GrpcLogExporter({ url: target.grpc, metadata: metadataOf(o.headers), compression })
  const config = { url: `${target.http}/v1/logs`, headers: o.headers, compression }
  return transport === 'http/json' ? new JsonLogExporter(config) : new ProtoLogExporter(config)
}

export function traceExporter(
  transport: Transport,
  target: { http: string; grpc: string },
  o: Options,
): Exporter<ReadableSpan[]> {
  const compression = o.gzip ? CompressionAlgorithm.GZIP : CompressionAlgorithm.NONE
  if (transport === 'grpc')
    return new GrpcTraceExporter({ url: target.grpc, metadata: metadataOf(o.headers), compression })
  const config = { url: `${target.http}/v1/traces`, headers: o.headers, compression }
  return transport === 'http/json' ? new JsonTraceExporter(config) : new ProtoTraceExporter(config)
}

/** Sends through an exporter; the ExportResult says whether the server took it (and why not). */
export const send = <T>(e: Exporter<T>, items: T) =>
  new Promise<ExportResult>((resolve) => e.export(items, resolve))

/** Log records as the SDK makes them (resource attributes included). */
export async function logRecords(
  resource: Record<string, string>,
  records: Array<{
    body?: string
    attributes?: Record<string, string | number | boolean>
    eventName?: string
  }>,
): Promise<ReadableLogRecord[]> {
  const memory = new InMemoryLogRecordExporter()
  const provider = new LoggerProvider({
    resource: resourceFromAttributes(resource),
    processors: [new SimpleLogRecordProcessor({ exporter: memory })],
  })
  const logger = provider.getLogger('otlp-test')
  for (const r of records) logger.emit({ body: r.body, attributes: r.attributes, eventName: r.eventName })
  await provider.forceFlush()
  const out = memory.getFinishedLogRecords()
  await provider.shutdown()
  return out
}

/** Finished spans as the SDK makes them. */
export async function spans(
  resource: Record<string, string>,
  make: (tracer: ReturnType<BasicTracerProvider['getTracer']>) => void,
): Promise<ReadableSpan[]> {
  const memory = new InMemorySpanExporter()
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes(resource),
    spanProcessors: [new SimpleSpanProcessor(memory)],
  })
  make(provider.getTracer('otlp-test'))
  await provider.forceFlush()
  const out = memory.getFinishedSpans()
  await provider.shutdown()
  return out
}

/** A port nothing listens on now (the gRPC server binds it a moment later). */
export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = createServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number }
      s.close(() => resolve(port))
    })
  })

import protobuf from 'protobufjs'
import common from './proto/common.proto' with { type: 'text' }
import logs from './proto/logs.proto' with { type: 'text' }
import logsService from './proto/logs_service.proto' with { type: 'text' }
import resource from './proto/resource.proto' with { type: 'text' }
import status from './proto/status.proto' with { type: 'text' }
import trace from './proto/trace.proto' with { type: 'text' }
import traceService from './proto/trace_service.proto' with { type: 'text' }

/**
 * OTLP's messages, parsed once from the .proto texts embedded in the build (text imports, so
 * the compiled binary carries them and reads no file at run time).
 */
const root = new protobuf.Root()
for (const text of [common, resource, logs, trace, logsService, traceService, status])
  protobuf.parse(text, root, { keepCase: false })
root.resolveAll()

export type Signal = 'logs' | 'traces'

const collector = (s: Signal) =>
  s === 'logs' ? 'opentelemetry.proto.collector.logs.v1' : 'opentelemetry.proto.collector.trace.v1'

/** What each signal's collector service is named and carries. */
export const SIGNALS = {
  logs: {
    service: `${collector('logs')}.LogsService`,
    request: root.lookupType(`${collector('logs')}.ExportLogsServiceRequest`),
    response: root.lookupType(`${collector('logs')}.ExportLogsServiceResponse`),
    /** The partial_success field counting what was refused. */
    rejectedField: 'rejectedLogRecords',
    /** The request's top-level list. */
    listField: 'resourceLogs',
  },
  traces: {
    service: `${collector('traces')}.TraceService`,
    request: root.lookupType(`${collector('traces')}.ExportTraceServiceRequest`),
    response: root.lookupType(`${collector('traces')}.ExportTraceServiceResponse`),
    rejectedField: 'rejectedSpans',
    listField: 'resourceSpans',
  },
} as const

/** google.rpc.Status: the body of an OTLP/HTTP protobuf error answer. */
export const RpcStatus = root.lookupType('google.rpc.Status')

// SQL migration files are imported as text (`with { type: 'text' }`) so `bun build --compile` embeds them.
declare module '*.sql' {
  const text: string
  export default text
}
// OTLP's .proto files likewise (plugins/ingest/otlp/proto), parsed by protobufjs at start.
declare module '*.proto' {
  const text: string
  export default text
}

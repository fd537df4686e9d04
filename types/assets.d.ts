// SQL migration files are imported as text (`with { type: 'text' }`) so `bun build --compile` embeds them.
declare module '*.sql' {
  const text: string
  export default text
}

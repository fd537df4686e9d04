/**
 * The Content-Security-Policy of a page liveops serves itself (the console, the API reference):
 * its own origin only, no plugin or base URL of another, forms posted home, never framed.
 * `extra` adds sources to a directive; `img` is named only when given (else `default-src`).
 */
export function pagePolicy(extra: { script?: string[]; style?: string[]; img?: string[] } = {}): string {
  const self = (more: string[] = []) => ["'self'", ...more].join(' ')
  return [
    "default-src 'self'",
    `script-src ${self(extra.script)}`,
    `style-src ${self(extra.style)}`,
    ...(extra.img ? [`img-src ${self(extra.img)}`] : []),
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ')
}

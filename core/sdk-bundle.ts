import { sdkBundle } from '../scripts/sdk-bundle' with { type: 'macro' }

/**
 * The browser SDK's text, inlined by a macro: at build time in the binary, and when this module
 * is first imported otherwise (core/sdk-asset.ts imports it at the first request, so a process
 * that never serves it never bundles it).
 */
export const SDK_JS: string = sdkBundle()

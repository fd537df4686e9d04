import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useId } from 'preact/hooks'

export interface Variant {
  name: string
  weight: number
}

/**
 * What the API checks before an experiment may run: two variants or more, names unique and not
 * blank, weights positive and summing to 100. The editor says it as the user types.
 */
export function variantProblems(vs: Variant[]): string[] {
  const out: string[] = []
  if (vs.length < 2) out.push('An experiment needs at least two variants.')
  const names = vs.map((v) => v.name.trim())
  if (names.some((n) => !n)) out.push('Every variant needs a name.')
  if (new Set(names).size !== names.length) out.push('Variant names must be different.')
  if (vs.some((v) => !(v.weight > 0))) out.push('Every weight must be above 0.')
  const sum = vs.reduce((a, v) => a + (Number.isFinite(v.weight) ? v.weight : 0), 0)
  if (Math.abs(sum - 100) > 1e-9) out.push(`Weights add up to ${Math.round(sum * 100) / 100}, not 100.`)
  return out
}

/** Rows of name and weight, with add, remove, "split evenly" and the sum shown live. */
export function VariantEditor({
  value,
  onChange,
}: { value: Variant[]; onChange: (v: Variant[]) => void }): VNode {
  const id = useId()
  const problems = variantProblems(value)
  const sum = value.reduce((a, v) => a + (Number.isFinite(v.weight) ? v.weight : 0), 0)
  const set = (i: number, patch: Partial<Variant>) =>
    onChange(value.map((v, j) => (j === i ? { ...v, ...patch } : v)))
  const even = () => {
    const n = value.length
    const base = Math.floor(100 / n)
    onChange(value.map((v, i) => ({ ...v, weight: i === 0 ? 100 - base * (n - 1) : base })))
  }
  return html`<fieldset class="variants" aria-describedby=${`${id}-sum`}>
    <legend>Variants</legend>
    <table>
      <thead><tr><th scope="col">Name</th><th scope="col">Weight (%)</th><th scope="col"><span class="sr-only">Remove</span></th></tr></thead>
      <tbody>
        ${value.map(
          (v, i) => html`<tr key=${i}>
            <td><input aria-label=${`Variant ${i + 1} name`} value=${v.name} onInput=${(e: Event) => set(i, { name: (e.currentTarget as HTMLInputElement).value })} /></td>
            <td>
              <input
                aria-label=${`Variant ${i + 1} weight`}
                type="number"
                min="0"
                max="100"
                step="any"
                value=${Number.isFinite(v.weight) ? v.weight : ''}
                onInput=${(e: Event) => set(i, { weight: Number((e.currentTarget as HTMLInputElement).value) })}
              />
            </td>
            <td>
              <button type="button" class="secondary small" disabled=${value.length <= 2} onClick=${() => onChange(value.filter((_, j) => j !== i))}>
                Remove<span class="sr-only"> variant ${i + 1}</span>
              </button>
            </td>
          </tr>`,
        )}
      </tbody>
    </table>
    <div class="buttons">
      <button type="button" class="secondary" onClick=${() => onChange([...value, { name: `variant-${value.length + 1}`, weight: 0 }])}>Add a variant</button>
      <button type="button" class="secondary" onClick=${even}>Split evenly</button>
    </div>
    <p id=${`${id}-sum`} class=${problems.length ? 'note error' : 'note ok'} aria-live="polite">
      ${problems.length ? problems.join(' ') : `Weights add up to ${sum}: ready to run.`}
    </p>
  </fieldset>`
}

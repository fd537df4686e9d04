import { html } from 'htm/preact'
import type { ComponentChildren, VNode } from 'preact'
import { useId } from 'preact/hooks'

type Opt = string | readonly [string, string]
const optValue = (o: Opt) => (typeof o === 'string' ? o : o[0])
const optLabel = (o: Opt) => (typeof o === 'string' ? o : o[1])

interface Common {
  label: string
  hint?: ComponentChildren
  /** A problem with this field, shown under it and announced. */
  error?: string
  required?: boolean
  disabled?: boolean
  class?: string
}

/** A label, its control, a hint and an error, tied together for assistive technology. */
function Wrap(p: Common & { id: string; control: (describedBy: string | undefined) => VNode }): VNode {
  const hintId = p.hint ? `${p.id}-hint` : undefined
  const errId = p.error ? `${p.id}-err` : undefined
  const describedBy = [hintId, errId].filter(Boolean).join(' ') || undefined
  return html`<div class=${`field ${p.class ?? ''}`}>
    <label for=${p.id}>${p.label}${p.required ? html`<span class="req" aria-hidden="true"> *</span>` : ''}</label>
    ${p.control(describedBy)}
    ${p.hint && html`<small id=${hintId} class="hint">${p.hint}</small>`}
    ${p.error && html`<small id=${errId} class="field-error">${p.error}</small>`}
  </div>`
}

const inputValue = (e: Event) => (e.currentTarget as HTMLInputElement).value

export function Input(
  p: Common & {
    value: string | number
    onValue: (v: string) => void
    type?: string
    placeholder?: string
    min?: number
    max?: number
    step?: number | string
    autocomplete?: string
    inputmode?: string
    name?: string
  },
): VNode {
  const id = useId()
  return html`<${Wrap}
    ...${p}
    id=${id}
    control=${(d: string | undefined) => html`<input
      id=${id}
      name=${p.name}
      type=${p.type ?? 'text'}
      value=${p.value}
      placeholder=${p.placeholder}
      min=${p.min}
      max=${p.max}
      step=${p.step}
      required=${p.required}
      disabled=${p.disabled}
      autocomplete=${p.autocomplete ?? 'off'}
      inputmode=${p.inputmode}
      aria-invalid=${p.error ? 'true' : undefined}
      aria-describedby=${d}
      onInput=${(e: Event) => p.onValue(inputValue(e))}
    />`}
  />`
}

export function TextArea(
  p: Common & {
    value: string
    onValue: (v: string) => void
    rows?: number
    mono?: boolean
    placeholder?: string
  },
): VNode {
  const id = useId()
  return html`<${Wrap}
    ...${p}
    id=${id}
    control=${(d: string | undefined) => html`<textarea
      id=${id}
      rows=${p.rows ?? 4}
      class=${p.mono ? 'mono' : undefined}
      value=${p.value}
      placeholder=${p.placeholder}
      required=${p.required}
      disabled=${p.disabled}
      spellcheck=${p.mono ? false : undefined}
      aria-invalid=${p.error ? 'true' : undefined}
      aria-describedby=${d}
      onInput=${(e: Event) => p.onValue(inputValue(e))}
    ></textarea>`}
  />`
}

export function Select(
  p: Common & { value: string; onValue: (v: string) => void; options: readonly Opt[]; placeholder?: string },
): VNode {
  const id = useId()
  return html`<${Wrap}
    ...${p}
    id=${id}
    control=${(d: string | undefined) => html`<select
      id=${id}
      value=${p.value}
      required=${p.required}
      disabled=${p.disabled}
      aria-describedby=${d}
      onChange=${(e: Event) => p.onValue(inputValue(e))}
    >
      ${p.placeholder !== undefined && html`<option value="">${p.placeholder}</option>`}
      ${p.options.map((o) => html`<option value=${optValue(o)}>${optLabel(o)}</option>`)}
    </select>`}
  />`
}

export function Check(p: {
  label: string
  checked: boolean
  onValue: (v: boolean) => void
  disabled?: boolean
}): VNode {
  return html`<label class="check">
    <input
      type="checkbox"
      checked=${p.checked}
      disabled=${p.disabled}
      onChange=${(e: Event) => p.onValue((e.currentTarget as HTMLInputElement).checked)}
    />
    ${p.label}
  </label>`
}

/** Several choices of a list (platforms, levels): a fieldset of check boxes. */
export function Checks(p: {
  legend: string
  options: readonly Opt[]
  values: readonly string[]
  onValues: (v: string[]) => void
  hint?: string
}): VNode {
  return html`<fieldset class="checks">
    <legend>${p.legend}</legend>
    ${p.options.map(
      (o) => html`<${Check}
        label=${optLabel(o)}
        checked=${p.values.includes(optValue(o))}
        onValue=${(on: boolean) =>
          p.onValues(on ? [...p.values, optValue(o)] : p.values.filter((v) => v !== optValue(o)))}
      />`,
    )}
    ${p.hint && html`<small class="hint">${p.hint}</small>`}
  </fieldset>`
}

/** A form that never reloads the page; Enter submits. */
export function Form(p: {
  onSubmit: () => void
  label: string
  children: ComponentChildren
  class?: string
}): VNode {
  return html`<form
    class=${`form ${p.class ?? ''}`}
    aria-label=${p.label}
    novalidate
    onSubmit=${(e: Event) => {
      e.preventDefault()
      p.onSubmit()
    }}
  >
    ${p.children}
  </form>`
}

import type { Ref } from "preact";
import { S, t, type Msg } from "../strings";
import { CODE_MAX, codeHint, digitsOnly, type TypedFactor } from "../lib/factor";

/**
 * The field of a current code of the caller's factors (an authenticator-app code or a recovery
 * code, as `kinds` says) that confirms a change of them: removing one, new recovery codes, or
 * adding a factor beside one. Its label, hint and error are the same in every such form; `id`
 * prefixes the ids of the error and the hint, which the input names as its description.
 */
export function CodeField(props: {
  id: string;
  kinds: readonly TypedFactor[];
  value: string;
  error?: Msg;
  inputRef: Ref<HTMLInputElement>;
  onInput: (value: string) => void;
}) {
  const errorId = `${props.id}-code-error`;
  const hintId = `${props.id}-code-hint`;
  return (
    <>
      <label>
        {S.codeLabel}
        <input ref={props.inputRef} name="code" autoComplete="one-time-code" autoCapitalize="none" spellcheck={false}
          inputMode={digitsOnly(props.kinds) ? "numeric" : "text"} maxLength={CODE_MAX} value={props.value}
          aria-invalid={!!props.error} aria-describedby={[props.error ? errorId : "", hintId].filter(Boolean).join(" ")}
          onInput={(e) => props.onInput((e.target as HTMLInputElement).value)} />
      </label>
      {props.error && <p class="field-error" id={errorId}>{t(props.error)}</p>}
      <p class="muted" id={hintId}>{S[codeHint(props.kinds)]}</p>
    </>
  );
}

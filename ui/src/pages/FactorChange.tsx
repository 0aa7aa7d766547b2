import { useEffect, useRef, useState } from "preact/hooks";
import { S, t, type Msg } from "../strings";
import { refusal } from "../lib/api";
import type { TypedFactor } from "../lib/factor";
import { checkChange, codeRefused } from "../lib/ownFactors";
import { CodeField } from "./CodeField";

/**
 * A change of the caller's second factors that asks for the password and a current code of a
 * factor (an app code or a recovery code, as `kinds` says): regenerating the recovery codes or
 * removing a factor. The form is the confirmation: its title and `text` say what happens, and
 * `danger` marks a removal. `run` makes the call and answers the recovery codes to show (none for
 * a removal); `onDone` gets the password, to sign in again (the change ends every session).
 */
export function FactorChange(props: {
  title: string;
  text: string;
  submit: string;
  danger?: boolean;
  kinds: readonly TypedFactor[];
  run: (password: string, code: string) => Promise<readonly string[]>;
  onDone: (password: string, codes: readonly string[]) => void;
  onCancel: () => void;
}) {
  const [password, setPassword] = useState("");
  const [code, setCode] = useState("");
  const [errors, setErrors] = useState<Record<string, Msg>>({});
  const [busy, setBusy] = useState(false);
  const passwordField = useRef<HTMLInputElement>(null);
  const codeField = useRef<HTMLInputElement>(null);
  useEffect(() => passwordField.current?.focus(), []);

  async function submit(ev: Event) {
    ev.preventDefault();
    const e = checkChange(password, code);
    setErrors(e);
    if (e.password) return passwordField.current?.focus();
    if (e.code) return codeField.current?.focus();
    setBusy(true);
    try {
      const codes = await props.run(password, code.trim());
      props.onDone(password, codes);
    } catch (err) {
      const m = refusal(err);
      setErrors({ form: m });
      setBusy(false);
      // A refused code was counted (or used): the next attempt needs another one.
      if (codeRefused(m)) {
        setCode("");
        codeField.current?.focus();
      } else if (m.key === "refusedWrongCurrent") {
        passwordField.current?.focus();
      }
    }
  }

  return (
    <form class="card" onSubmit={submit} noValidate aria-labelledby="change-title" data-testid="factor-change">
      <h3 id="change-title">{props.title}</h3>
      {errors.form && <p class="error" role="alert">{S.refused + t(errors.form)}</p>}
      <p>{props.text}</p>
      <p class="muted">{S.changeConfirmText}</p>
      <label>
        {S.currentPassword}
        <input ref={passwordField} name="password" type="password" autoComplete="current-password" value={password}
          aria-invalid={!!errors.password} aria-describedby={errors.password ? "change-password-error" : undefined}
          onInput={(e) => setPassword((e.target as HTMLInputElement).value)} />
      </label>
      {errors.password && <p class="field-error" id="change-password-error">{t(errors.password)}</p>}
      <CodeField id="change" kinds={props.kinds} value={code} error={errors.code} inputRef={codeField} onInput={setCode} />
      <div class="buttons">
        <button type="submit" class={props.danger ? "danger" : "primary"} disabled={busy}>
          {busy ? S.working : props.submit}
        </button>
        <button type="button" onClick={props.onCancel} disabled={busy}>{S.cancel}</button>
      </div>
    </form>
  );
}

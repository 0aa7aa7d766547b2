import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { S, t, type Msg } from "../strings";
import { api, refusal } from "../lib/api";
import { signInAgain, type FactorStep } from "../lib/login";
import { FactorCard } from "./FactorCard";
import { checkPasswordChange } from "../lib/validate";

/**
 * The change-password form. After the change (which ends every session of the user) the tab
 * signs in again with the new password (and the second factor, when the user has one) and
 * reloads; if that fails, `onSignedOut` shows the card.
 */
export function ChangePassword(props: { onSignedOut: () => void }) {
  const [current, setCurrent] = useState("");
  const [next, setNext] = useState("");
  const [repeat, setRepeat] = useState("");
  const [errors, setErrors] = useState<Record<string, Msg>>({});
  const [status, setStatus] = useState(false);
  const [busy, setBusy] = useState(false);
  const [factor, setFactor] = useState<FactorStep | null>(null);

  async function submit(ev: Event) {
    ev.preventDefault();
    const e = checkPasswordChange(current, next, repeat);
    setErrors(e);
    if (Object.keys(e).length) return;
    setBusy(true);
    try {
      await api.changeOwnPassword({ oldPassword: current, newPassword: next });
    } catch (err) {
      setErrors({ form: refusal(err) });
      setBusy(false);
      return;
    }
    setStatus(true);
    const again = await signInAgain(next);
    if (again === true) {
      location.reload();
    } else if (again) {
      setFactor(again);
    } else {
      props.onSignedOut();
    }
  }

  if (factor) {
    return (
      <FactorCard embedded factors={factor.factors} onRestart={props.onSignedOut}
        verify={async (code) => {
          await factor.verify(code);
          location.reload();
        }}
        passkey={factor.passkey ? async () => {
          await factor.verifyPasskey();
          location.reload();
        } : undefined} />
    );
  }

  const field = (name: string, label: string, value: string, set: (v: string) => void, auto: string) => (
    <>
      <label>
        {label}
        <input name={name} type="password" autoComplete={auto} value={value} aria-invalid={!!errors[name]}
          aria-describedby={errors[name] ? `${name}-error` : undefined}
          onInput={(e) => set((e.target as HTMLInputElement).value)} />
      </label>
      {errors[name] && <p class="field-error" id={`${name}-error`}>{t(errors[name])}</p>}
    </>
  );

  return (
    <form class="card" onSubmit={submit} noValidate>
      <h2>{S.changePassword}</h2>
      {errors.form && <p class="error" role="alert">{S.refused + t(errors.form)}</p>}
      {status && <p class="notice" role="status">{S.passwordChanged}</p>}
      {field("current", S.currentPassword, current, setCurrent, "current-password")}
      {field("next", S.newPassword, next, setNext, "new-password")}
      {field("repeat", S.confirmPassword, repeat, setRepeat, "new-password")}
      <button type="submit" class="primary" disabled={busy}>{busy ? S.changing : S.changePassword}</button>
    </form>
  );
}

/** The must-change screen: nothing but the change form until the password is the user's own. */
export function MustChange(props: { onSignedOut: () => void; extra?: ComponentChildren }) {
  return (
    <main class="center">
      <div class="stack narrow">
        <h1>{S.mustChangeTitle}</h1>
        <p>{S.mustChangeText}</p>
        <ChangePassword onSignedOut={props.onSignedOut} />
        {props.extra}
      </div>
    </main>
  );
}

import type { ComponentChildren } from "preact";
import { useRef, useState } from "preact/hooks";
import { S, t, type Msg } from "../strings";
import type { Factors } from "../gen/ichor/v1alpha1/user_pb";
import { api, refusal } from "../lib/api";
import { TYPED_FACTORS, checkCode } from "../lib/factor";
import { signInAgain, type FactorStep } from "../lib/login";
import { codeRefused, passwordCodeKinds, signedInWithFactor } from "../lib/ownFactors";
import { session } from "../lib/session";
import { CodeField } from "./CodeField";
import { FactorCard } from "./FactorCard";
import { checkPasswordChange } from "../lib/validate";

/**
 * The change-password form. A caller with an authenticator app or a passkey also types a current
 * code of a factor, which the change uses up (the issuer asks for it: a stolen session and
 * password do not change the password); `factors` are the caller's when known (the account
 * page), else the session says whether a code is asked. After the change (which ends every
 * session of the user) the tab signs in again with the new password (and the second factor, when
 * the user has one) and reloads; if that fails, `onSignedOut` shows the card.
 */
export function ChangePassword(props: { onSignedOut: () => void; factors?: Factors | null }) {
  const [current, setCurrent] = useState("");
  const [next, setNext] = useState("");
  const [repeat, setRepeat] = useState("");
  const [code, setCode] = useState("");
  const [errors, setErrors] = useState<Record<string, Msg>>({});
  const [status, setStatus] = useState(false);
  const [busy, setBusy] = useState(false);
  const [factor, setFactor] = useState<FactorStep | null>(null);
  // The issuer asked for a code the form did not know to ask for (a factor added elsewhere).
  const [asked, setAsked] = useState(false);
  const codeField = useRef<HTMLInputElement>(null);
  const kinds = passwordCodeKinds(props.factors, signedInWithFactor(session.idToken())) ??
    (asked ? [...TYPED_FACTORS] : undefined);

  async function submit(ev: Event) {
    ev.preventDefault();
    const e = checkPasswordChange(current, next, repeat);
    const codeError = kinds ? checkCode(code) : null;
    if (codeError) e.code = codeError;
    setErrors(e);
    if (Object.keys(e).length) {
      if (Object.keys(e).length === 1 && e.code) codeField.current?.focus();
      return;
    }
    setBusy(true);
    try {
      await api.changeOwnPassword({ oldPassword: current, newPassword: next, code: kinds ? code.trim() : "" });
    } catch (err) {
      const m = refusal(err);
      setErrors({ form: m });
      setBusy(false);
      // A refused code was counted (or used): the next attempt needs another one.
      if (codeRefused(m)) {
        setCode("");
        setAsked(true);
        setTimeout(() => codeField.current?.focus(), 0);
      }
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
    <form class="card" onSubmit={submit} noValidate data-testid="change-password">
      <h2>{S.changePassword}</h2>
      {errors.form && <p class="error" role="alert">{S.refused + t(errors.form)}</p>}
      {status && <p class="notice" role="status">{S.passwordChanged}</p>}
      {kinds && <p class="muted">{S.passwordCodeText}</p>}
      {field("current", S.currentPassword, current, setCurrent, "current-password")}
      {field("next", S.newPassword, next, setNext, "new-password")}
      {field("repeat", S.confirmPassword, repeat, setRepeat, "new-password")}
      {kinds && (
        <CodeField id="password" kinds={kinds} value={code} error={errors.code} inputRef={codeField} onInput={setCode} />
      )}
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

import { useEffect, useRef, useState } from "preact/hooks";
import { S, t, type Msg } from "../strings";
import { api, refusal } from "../lib/api";
import type { TypedFactor } from "../lib/factor";
import { checkEnrol, codeRefused } from "../lib/ownFactors";
import { PASSKEY_NAME_MAX, PasskeyError, checkPasskeyName, createPasskey } from "../lib/webauthn";
import { CodeField } from "./CodeField";

/**
 * Adding a passkey: the password and a name (and a current code when the caller has an
 * authenticator app or a passkey already: `codeKinds`, the kinds that code may be; absent when
 * none is asked), then the browser's prompt. BeginPasskeyRegistration checks the password (and
 * uses the code up) and answers the options, the browser makes the passkey, and
 * FinishPasskeyRegistration stores it; nothing is stored before. Then `onEnrolled` gets the
 * password (to sign in again: the change ended every session) and the recovery codes to show
 * once. A cancelled prompt or a refusal leaves the form as it was, with the reason. `level` is
 * the heading level of the form's title.
 */
export function PasskeyEnrol(props: {
  level: 2 | 3;
  codeKinds?: readonly TypedFactor[];
  onEnrolled: (password: string, codes: readonly string[]) => void;
  onCancel: () => void;
}) {
  const [password, setPassword] = useState("");
  const [name, setName] = useState(S.passkeyNameDefault);
  const [code, setCode] = useState("");
  // Whether the code field is where the next try starts (the code was refused or used up).
  const [newCode, setNewCode] = useState(false);
  const [errors, setErrors] = useState<Record<string, Msg>>({});
  // Whether the form's error is the server's refusal (said as one) or the browser's.
  const [refused, setRefused] = useState(false);
  const [busy, setBusy] = useState(false);
  const passwordField = useRef<HTMLInputElement>(null);
  const nameField = useRef<HTMLInputElement>(null);
  const codeField = useRef<HTMLInputElement>(null);
  const submitButton = useRef<HTMLButtonElement>(null);
  const Title = `h${props.level}` as "h2" | "h3";
  useEffect(() => passwordField.current?.focus(), []);
  // After a refusal (once the button is enabled again): the password when it was wrong, the
  // code when another one is needed, else the button, so that the next try is one key away.
  useEffect(() => {
    const m = errors.form;
    if (!m) return;
    (m.key === "refusedWrongCurrent" ? passwordField.current : newCode ? codeField.current : submitButton.current)?.focus();
  }, [errors.form]);

  async function submit(ev: Event) {
    ev.preventDefault();
    const asked = !!props.codeKinds;
    const e = checkEnrol(password, code, asked);
    const badName = checkPasskeyName(name);
    if (badName) e.name = badName;
    setErrors(e);
    if (e.password) return passwordField.current?.focus();
    if (e.code) return codeField.current?.focus();
    if (e.name) return nameField.current?.focus();
    setBusy(true);
    // `used`: the start took the code (or counted it as wrong), so the next try needs another.
    const fail = (m: Msg, server: boolean, used: boolean) => {
      if (asked && used) setCode("");
      setNewCode(asked && used);
      setErrors({ form: m });
      setRefused(server);
      setBusy(false);
    };
    let begun: { optionsJson: string; ticket: string };
    try {
      begun = await api.beginPasskeyRegistration({ password, code: asked ? code.trim() : "" });
    } catch (err) {
      const m = refusal(err);
      return fail(m, true, codeRefused(m));
    }
    let credentialJson: string;
    try {
      credentialJson = await createPasskey(JSON.parse(begun.optionsJson));
    } catch (err) {
      return fail(err instanceof PasskeyError ? err.msg : { key: "passkeyFailed" }, false, true);
    }
    try {
      const r = await api.finishPasskeyRegistration({ ticket: begun.ticket, name: name.trim(), credentialJson });
      props.onEnrolled(password, r.recoveryCodes);
    } catch (err) {
      fail(refusal(err), true, true);
    }
  }

  return (
    <form class="card" onSubmit={submit} noValidate aria-labelledby="passkey-enrol-title" data-testid="passkey-enrol">
      <Title id="passkey-enrol-title">{S.addPasskey}</Title>
      {errors.form && <p class="error" role="alert">{(refused ? S.refused : "") + t(errors.form)}</p>}
      <p>{S.passkeyEnrolText}</p>
      {props.codeKinds && <p class="muted">{S.addFactorCodeText}</p>}
      <label>
        {S.currentPassword}
        <input ref={passwordField} name="password" type="password" autoComplete="current-password" value={password}
          aria-invalid={!!errors.password} aria-describedby={errors.password ? "passkey-password-error" : undefined}
          onInput={(e) => setPassword((e.target as HTMLInputElement).value)} />
      </label>
      {errors.password && <p class="field-error" id="passkey-password-error">{t(errors.password)}</p>}
      {props.codeKinds && (
        <CodeField id="passkey" kinds={props.codeKinds} value={code} error={errors.code} inputRef={codeField}
          onInput={setCode} />
      )}
      <label>
        {S.passkeyName}
        <input ref={nameField} name="passkey-name" autoComplete="off" maxLength={PASSKEY_NAME_MAX} value={name}
          aria-invalid={!!errors.name}
          aria-describedby={[errors.name ? "passkey-name-error" : "", "passkey-name-hint"].filter(Boolean).join(" ")}
          onInput={(e) => setName((e.target as HTMLInputElement).value)} />
      </label>
      {errors.name && <p class="field-error" id="passkey-name-error">{t(errors.name)}</p>}
      <p class="muted" id="passkey-name-hint">{S.passkeyNameHint}</p>
      <div class="buttons">
        <button ref={submitButton} type="submit" class="primary" disabled={busy}>{busy ? S.working : S.addPasskey}</button>
        <button type="button" onClick={props.onCancel} disabled={busy}>{S.cancel}</button>
      </div>
    </form>
  );
}

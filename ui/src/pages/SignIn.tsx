import { useEffect, useState } from "preact/hooks";
import type { ComponentChildren } from "preact";
import { S, msg, t, type Msg } from "../strings";
import { SignInError, signIn, type Provider } from "../lib/login";
import { externalProvider, startExternalSignIn } from "../lib/external";

/** The sign-in card; `notice` says why the session ended, `extra` goes below the form. */
export function SignIn(props: { notice?: Msg; onSignedIn: () => void; extra?: ComponentChildren }) {
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [errors, setErrors] = useState<Record<string, Msg>>({});
  const [busy, setBusy] = useState(false);
  const [external, setExternal] = useState<Provider | null>(null);
  const [leaving, setLeaving] = useState(false);
  const [warning, setWarning] = useState<string | null>(null);

  useEffect(() => {
    void externalProvider().then((x) => {
      setExternal(x.provider);
      setWarning(x.warning);
    });
  }, []);

  async function signInExternal() {
    if (!external) return;
    setErrors({});
    setLeaving(true);
    try {
      await startExternalSignIn(external);
    } catch (err) {
      setLeaving(false);
      setErrors({ form: err instanceof SignInError ? err.msg : msg("network") });
    }
  }

  async function submit(ev: Event) {
    ev.preventDefault();
    const e: Record<string, Msg> = {};
    if (username.trim() === "") e.username = msg("enterUserName");
    if (password === "") e.password = msg("enterPassword");
    setErrors(e);
    if (Object.keys(e).length) return;
    setBusy(true);
    try {
      await signIn(username.trim(), password);
      props.onSignedIn();
    } catch (err) {
      setErrors({ form: err instanceof SignInError ? err.msg : msg("network") });
    } finally {
      setBusy(false);
    }
  }

  return (
    <main class="center">
      <form class="card" onSubmit={submit} noValidate aria-labelledby="signin-title">
        <h1 id="signin-title">{S.signInTitle}</h1>
        {props.notice && <p class="notice" role="status">{t(props.notice)}</p>}
        {errors.form && <p class="error" role="alert">{t(errors.form)}</p>}
        <label>
          {S.userName}
          <input name="username" autoComplete="username" value={username} autoFocus
            aria-invalid={!!errors.username} aria-describedby={errors.username ? "username-error" : undefined}
            onInput={(e) => setUsername((e.target as HTMLInputElement).value)} />
        </label>
        {errors.username && <p class="field-error" id="username-error">{t(errors.username)}</p>}
        <label>
          {S.password}
          <input name="password" type="password" autoComplete="current-password" value={password}
            aria-invalid={!!errors.password} aria-describedby={errors.password ? "password-error" : undefined}
            onInput={(e) => setPassword((e.target as HTMLInputElement).value)} />
        </label>
        {errors.password && <p class="field-error" id="password-error">{t(errors.password)}</p>}
        <button type="submit" class="primary" disabled={busy || leaving}>{busy ? S.signingIn : S.signIn}</button>
        {external && (
          <>
            <p class="separator" role="separator"><span>{S.or}</span></p>
            <button type="button" class="external" disabled={busy || leaving} onClick={signInExternal}>
              {leaving ? S.redirectingExternal : S.signInExternal}
            </button>
            {warning !== null && <TrustWarning reason={warning} />}
          </>
        )}
        {props.extra}
      </form>
    </main>
  );
}

/** The warning that the cluster's API server trusts the identity provider differently. */
export function TrustWarning(props: { reason: string }) {
  return (
    <p class="warning" role="status" data-testid="trust-warning">
      {S.externalMismatch}
      {props.reason && <span class="muted"> ({props.reason})</span>}
    </p>
  );
}

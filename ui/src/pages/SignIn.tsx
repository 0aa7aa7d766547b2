import { useEffect, useState } from "preact/hooks";
import type { ComponentChildren } from "preact";
import { S, msg, t, type Msg } from "../strings";
import { SignInError, signIn, type FactorStep, type Provider } from "../lib/login";
import { externalProvider, startExternalSignIn } from "../lib/external";
import { NAME_MAX, PASSWORD_MAX } from "../lib/validate";
import { FactorCard } from "./FactorCard";

/**
 * The card as the issuer's own sign-in page (`/oidc/login?ticket=`, the redirect flow of
 * `ichor auth login`) shows it: the form is posted to /oidc/login with the ticket, and the issuer
 * answers with the redirect to the client or this page again with `error`.
 */
export interface FormPost {
  /** The signed login ticket, posted back as the hidden field `ticket`. */
  ticket: string;
  /** The user name typed before. */
  username: string;
  /** The refusal of the last attempt. */
  error: Msg | null;
  /** Whom the sign-in is for (the client, and the CLI's port). */
  purpose: Msg;
}

/**
 * The sign-in card; `notice` says why the session ended, `extra` goes below the form. With
 * `post`, the card posts its form to the issuer (no in-page sign-in, no identity provider button)
 * after the same checks.
 */
export function SignIn(props: { notice?: Msg; onSignedIn?: () => void; extra?: ComponentChildren; post?: FormPost }) {
  const post = props.post;
  const [username, setUsername] = useState(post?.username ?? "");
  const [password, setPassword] = useState("");
  const [errors, setErrors] = useState<Record<string, Msg>>(post?.error ? { form: post.error } : {});
  const [busy, setBusy] = useState(false);
  const [external, setExternal] = useState<Provider | null>(null);
  const [leaving, setLeaving] = useState(false);
  const [warning, setWarning] = useState<string | null>(null);
  const [factor, setFactor] = useState<FactorStep | null>(null);

  useEffect(() => {
    if (post) {
      // Back to this page from the client's answer (a page restored from the back-forward
      // cache): the form can be sent again.
      const shown = (e: PageTransitionEvent) => { if (e.persisted) setBusy(false); };
      addEventListener("pageshow", shown);
      return () => removeEventListener("pageshow", shown);
    }
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
    const e: Record<string, Msg> = {};
    if (username.trim() === "") e.username = msg("enterUserName");
    if (password === "") e.password = msg("enterPassword");
    if (post && Object.keys(e).length === 0) {
      // The browser posts the form once this handler returns: the user name as the in-page
      // sign-in sends it, trimmed.
      const field = (ev.currentTarget as HTMLFormElement).elements.namedItem("username");
      if (field instanceof HTMLInputElement) field.value = username.trim();
      setUsername(username.trim());
      setErrors({});
      setBusy(true);
      return;
    }
    ev.preventDefault();
    setErrors(e);
    if (Object.keys(e).length) return;
    setBusy(true);
    try {
      const step = await signIn(username.trim(), password);
      if (step) {
        setPassword("");
        setFactor(step);
      } else {
        props.onSignedIn?.();
      }
    } catch (err) {
      setErrors({ form: err instanceof SignInError ? err.msg : msg("network") });
    } finally {
      setBusy(false);
    }
  }

  if (factor) {
    return (
      <FactorCard factors={factor.factors} extra={props.extra}
        verify={async (code) => {
          await factor.verify(code);
          props.onSignedIn?.();
        }}
        passkey={factor.passkey ? async () => {
          await factor.verifyPasskey();
          props.onSignedIn?.();
        } : undefined}
        onRestart={() => {
          setErrors({});
          setFactor(null);
        }} />
    );
  }

  return (
    <main class="center">
      <form class="card" onSubmit={submit} noValidate aria-labelledby="signin-title"
        {...(post ? { method: "post", action: "/oidc/login" } : {})}>
        <h1 id="signin-title">{S.signInTitle}</h1>
        {post && <p class="muted" data-testid="sign-in-purpose">{t(post.purpose)}</p>}
        {props.notice && <p class="notice" role="status">{t(props.notice)}</p>}
        {errors.form && <p class="error" role="alert">{t(errors.form)}</p>}
        {post && <input type="hidden" name="ticket" value={post.ticket} />}
        <label>
          {S.userName}
          <input name="username" autoComplete="username" autoCapitalize="none" spellcheck={false} maxLength={NAME_MAX}
            value={username} autoFocus={!post?.username}
            aria-invalid={!!errors.username} aria-describedby={errors.username ? "username-error" : undefined}
            onInput={(e) => setUsername((e.target as HTMLInputElement).value)} />
        </label>
        {errors.username && <p class="field-error" id="username-error">{t(errors.username)}</p>}
        <label>
          {S.password}
          <input name="password" type="password" autoComplete="current-password" maxLength={PASSWORD_MAX}
            value={password} autoFocus={!!post?.username}
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

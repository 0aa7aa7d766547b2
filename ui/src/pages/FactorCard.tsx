import { useEffect, useRef, useState } from "preact/hooks";
import type { ComponentChildren } from "preact";
import { S, msg, t, type Msg } from "../strings";
import { CODE_MAX, checkCode, codeHint, digitsOnly, mustStartAgain, type TypedFactor } from "../lib/factor";
import { SignInError } from "../lib/login";

/**
 * The step as the issuer's own sign-in page shows it (`ichor auth login`'s page): the form is
 * posted to /oidc/login/factor with the second-factor ticket, and the issuer answers with the
 * redirect to the client or this page again with `error`.
 */
export interface FactorPost {
  /** The signed second-factor ticket, posted back as the hidden field `factor_ticket`. */
  factorTicket: string;
  /** The refusal of the last attempt. */
  error: Msg | null;
  /** Whom the sign-in is for (the client, and the CLI's port). */
  purpose: Msg;
}

/**
 * The second step of a sign-in: one code field (an authenticator-app code or a recovery code, as
 * `factors` says), focused when shown. In the SPA `verify` sends the code and `onRestart` goes back
 * to the password (offered always, and as the way on once the step is no longer valid); with
 * `post` the card posts its form to the issuer instead. `embedded` renders the card alone (a
 * second-level heading, no `<main>`), for a page that has its own, as after a password change;
 * `notice` says above the field why the step is asked for.
 */
export function FactorCard(props: {
  factors: readonly TypedFactor[];
  verify?: (code: string) => Promise<void>;
  onRestart?: () => void;
  post?: FactorPost;
  extra?: ComponentChildren;
  embedded?: boolean;
  notice?: string;
}) {
  const post = props.post;
  const [code, setCode] = useState("");
  const [fieldError, setFieldError] = useState<Msg | null>(null);
  const [formError, setFormError] = useState<Msg | null>(post?.error ?? null);
  const [busy, setBusy] = useState(false);
  const field = useRef<HTMLInputElement>(null);
  const restart = useRef<HTMLButtonElement>(null);
  const expired = formError !== null && mustStartAgain(formError);
  // The field takes the focus when the step appears (autofocus is honoured on page load only)
  // and again after a refusal, so the next code can be typed at once; once the step is no longer
  // valid, the way back to the password does.
  useEffect(() => (expired ? restart.current : field.current)?.focus(), [formError]);

  useEffect(() => {
    if (!post) return;
    // Back to this page from the client's answer (restored from the back-forward cache).
    const shown = (e: PageTransitionEvent) => { if (e.persisted) setBusy(false); };
    addEventListener("pageshow", shown);
    return () => removeEventListener("pageshow", shown);
  }, []);

  async function submit(ev: Event) {
    const missing = checkCode(code);
    if (post && !missing) {
      // The browser posts the form once this handler returns, the code as typed but trimmed.
      const input = (ev.currentTarget as HTMLFormElement).elements.namedItem("code");
      if (input instanceof HTMLInputElement) input.value = code.trim();
      setFieldError(null);
      setBusy(true);
      return;
    }
    ev.preventDefault();
    setFieldError(missing);
    if (missing || !props.verify || expired) {
      if (missing) field.current?.focus();
      return;
    }
    setFormError(null);
    setBusy(true);
    try {
      await props.verify(code.trim());
    } catch (err) {
      setCode("");
      setFormError(err instanceof SignInError ? err.msg : msg("network"));
      setBusy(false);
    }
  }

  const described = [fieldError ? "code-error" : "", "code-hint"].filter(Boolean).join(" ");
  const Heading = props.embedded ? "h2" : "h1";
  const card = (
    <form class="card" onSubmit={submit} noValidate aria-labelledby="factor-title" data-testid="factor-step"
      {...(post ? { method: "post", action: "/oidc/login/factor" } : {})}>
      <Heading id="factor-title">{S.factorTitle}</Heading>
      {post && <p class="muted" data-testid="sign-in-purpose">{t(post.purpose)}</p>}
      {props.notice && <p class="notice" role="status">{props.notice}</p>}
      {formError && <p class="error" role="alert">{t(formError)}</p>}
      {post && <input type="hidden" name="factor_ticket" value={post.factorTicket} />}
      <label>
        {S.verificationCode}
        <input ref={field} name="code" autoComplete="one-time-code" autoCapitalize="none" spellcheck={false}
          inputMode={digitsOnly(props.factors) ? "numeric" : "text"} maxLength={CODE_MAX} value={code}
          disabled={expired} aria-invalid={!!fieldError} aria-describedby={described}
          onInput={(e) => setCode((e.target as HTMLInputElement).value)} />
      </label>
      {fieldError && <p class="field-error" id="code-error">{t(fieldError)}</p>}
      <p class="muted" id="code-hint">{S[codeHint(props.factors)]}</p>
      {!expired && (
        <button type="submit" class="primary" disabled={busy}>{busy ? S.verifying : S.verify}</button>
      )}
      {props.onRestart && (
        <button ref={restart} type="button" class={expired ? "primary" : undefined} disabled={busy} onClick={props.onRestart}>
          {S.startAgain}
        </button>
      )}
      {props.extra}
    </form>
  );
  return props.embedded ? card : <main class="center">{card}</main>;
}

import { useEffect, useRef, useState } from "preact/hooks";
import type { ComponentChildren } from "preact";
import { S, msg, t, type Msg } from "../strings";
import { CODE_MAX, checkCode, codeHint, digitsOnly, mustStartAgain, type TypedFactor } from "../lib/factor";
import { SignInError } from "../lib/login";
import { PasskeyError, getPasskey, passkeysAvailable } from "../lib/webauthn";

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
  /** The options for `navigator.credentials.get` when a passkey is offered, else null. */
  passkeyOptions?: unknown | null;
  /** Whom the sign-in is for (the client, and the CLI's port). */
  purpose: Msg;
}

/** Where the card notes, across the post of its form, that the answer sent was a passkey's. */
const ANSWER_KEY = "ichor.factorAnswer";

function rememberAnswer(kind: "passkey" | "code") {
  try {
    sessionStorage.setItem(ANSWER_KEY, kind);
  } catch {
    // Storage refused: a refused passkey then reads as a refused code.
  }
}

/** The kind of the answer posted last, read once (the page the issuer answered with). */
function postedAnswer(): string | null {
  try {
    const kind = sessionStorage.getItem(ANSWER_KEY);
    sessionStorage.removeItem(ANSWER_KEY);
    return kind;
  } catch {
    return null;
  }
}

/** The message of a thrown refusal: the issuer's, the browser's, or a network failure. */
const messageOf = (err: unknown): Msg =>
  err instanceof SignInError || err instanceof PasskeyError ? err.msg : msg("network");

/**
 * The second step of a sign-in: a passkey, offered first when the issuer offers one (it cannot be
 * phished; `passkey` asks the browser and sends its answer), and one code field (an
 * authenticator-app code or a recovery code, as `factors` says). The passkey button, else the
 * code field, is focused when shown. In the SPA `verify` sends the code and `onRestart` goes back
 * to the password (offered always, and as the way on once the step is no longer valid); with
 * `post` the card posts its forms to the issuer instead (the code, or the passkey's answer as the
 * field `credential`). `embedded` renders the card alone (a second-level heading, no `<main>`),
 * for a page that has its own, as after a password change; `notice` says above the field why the
 * step is asked for.
 */
export function FactorCard(props: {
  factors: readonly TypedFactor[];
  verify?: (code: string) => Promise<void>;
  passkey?: () => Promise<void>;
  onRestart?: () => void;
  post?: FactorPost;
  extra?: ComponentChildren;
  embedded?: boolean;
  notice?: string;
}) {
  const post = props.post;
  const offersPasskey = post ? (post.passkeyOptions ?? null) !== null : !!props.passkey;
  const canPasskey = offersPasskey && passkeysAvailable();
  const typed = props.factors.length > 0;
  // The issuer's refusal of a posted passkey reads as a code's: the card says which it was.
  const [postedPasskey] = useState(() => !!post?.error && postedAnswer() === "passkey");
  const [code, setCode] = useState("");
  const [fieldError, setFieldError] = useState<Msg | null>(null);
  const [formError, setFormError] = useState<Msg | null>(
    postedPasskey && post?.error?.key === "wrongCode" ? msg("passkeyRefused") : (post?.error ?? null));
  const [busy, setBusy] = useState(false);
  const [tried, setTried] = useState<"passkey" | "code">(postedPasskey || (canPasskey && !post?.error) ? "passkey" : "code");
  const field = useRef<HTMLInputElement>(null);
  const passkeyButton = useRef<HTMLButtonElement>(null);
  const passkeyForm = useRef<HTMLFormElement>(null);
  const credentialField = useRef<HTMLInputElement>(null);
  const restart = useRef<HTMLButtonElement>(null);
  const expired = formError !== null && mustStartAgain(formError);
  // The passkey button, else the field, takes the focus when the step appears (autofocus is
  // honoured on page load only) and again after a refusal of that answer, so that the next try is
  // one key away; once the step is no longer valid, the way back to the password does.
  useEffect(() => {
    const target = expired ? restart.current : tried === "passkey" && canPasskey ? passkeyButton.current : field.current;
    (target ?? passkeyButton.current ?? field.current)?.focus();
  }, [formError]);

  useEffect(() => {
    if (!post) return;
    // Back to this page from the client's answer (restored from the back-forward cache).
    const shown = (e: PageTransitionEvent) => { if (e.persisted) setBusy(false); };
    addEventListener("pageshow", shown);
    return () => removeEventListener("pageshow", shown);
  }, []);

  async function submit(ev: Event) {
    const missing = checkCode(code);
    setTried("code");
    if (post && !missing) {
      // The browser posts the form once this handler returns, the code as typed but trimmed.
      const input = (ev.currentTarget as HTMLFormElement).elements.namedItem("code");
      if (input instanceof HTMLInputElement) input.value = code.trim();
      rememberAnswer("code");
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
      setFormError(messageOf(err));
      setBusy(false);
    }
  }

  async function usePasskey(ev: Event) {
    ev.preventDefault();
    if (expired || busy) return;
    setTried("passkey");
    setFieldError(null);
    setFormError(null);
    setBusy(true);
    try {
      if (post) {
        const credential = await getPasskey(post.passkeyOptions);
        const form = passkeyForm.current;
        if (!form || !credentialField.current) return;
        credentialField.current.value = JSON.stringify(credential);
        rememberAnswer("passkey");
        // Posted as the code form is; the issuer answers with the redirect or this page again.
        form.submit();
        return;
      }
      await props.passkey?.();
    } catch (err) {
      setFormError(messageOf(err));
      setBusy(false);
    }
  }

  const described = [fieldError ? "code-error" : "", "code-hint"].filter(Boolean).join(" ");
  const Heading = props.embedded ? "h2" : "h1";
  const card = (
    <div class="card" data-testid="factor-step">
      <Heading id="factor-title">{S.factorTitle}</Heading>
      {post && <p class="muted" data-testid="sign-in-purpose">{t(post.purpose)}</p>}
      {props.notice && <p class="notice" role="status">{props.notice}</p>}
      {formError && <p class="error" role="alert">{t(formError)}</p>}
      {offersPasskey && !canPasskey && <p class="muted">{S.passkeyNoBrowser}</p>}
      {canPasskey && (
        <form ref={passkeyForm} class="step" onSubmit={usePasskey} noValidate data-testid="passkey-step"
          {...(post ? { method: "post", action: "/oidc/login/factor" } : {})}>
          {post && <input type="hidden" name="factor_ticket" value={post.factorTicket} />}
          {post && <input ref={credentialField} type="hidden" name="credential" value="" />}
          <button ref={passkeyButton} type="submit" class="primary" disabled={busy || expired}
            aria-describedby="passkey-hint">
            {busy && tried === "passkey" ? S.usingPasskey : S.usePasskey}
          </button>
          <p class="muted" id="passkey-hint">{S.passkeyHint}</p>
        </form>
      )}
      {canPasskey && typed && <p class="separator" role="separator"><span>{S.or}</span></p>}
      {typed && (
        <form class="step" onSubmit={submit} noValidate aria-labelledby="factor-title"
          {...(post ? { method: "post", action: "/oidc/login/factor" } : {})}>
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
            <button type="submit" class={canPasskey ? undefined : "primary"} disabled={busy}>
              {busy && tried === "code" ? S.verifying : S.verify}
            </button>
          )}
        </form>
      )}
      {props.onRestart && (
        <button ref={restart} type="button" class={expired ? "primary" : undefined} disabled={busy} onClick={props.onRestart}>
          {S.startAgain}
        </button>
      )}
      {props.extra}
    </div>
  );
  return props.embedded ? card : <main class="center">{card}</main>;
}

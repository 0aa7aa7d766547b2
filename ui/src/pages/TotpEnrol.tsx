import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { S, t, type Key, type Msg } from "../strings";
import { api, refusal } from "../lib/api";
import type { TypedFactor } from "../lib/factor";
import { TOTP_DIGITS, checkEnrol, checkTotpCode, codeRefused, groupSecret, normalizeTotpCode } from "../lib/ownFactors";
import { qrDrawing } from "../lib/qr";
import { CodeField } from "./CodeField";

/** What BeginTotp answered: kept in this component's state only, never stored or logged. */
interface Begun {
  secret: string;
  uri: string;
  ticket: string;
}

/** The QR code of an `otpauth://` URI, drawn as SVG. */
function QrCode(props: { text: string; label: string }) {
  const d = useMemo(() => qrDrawing(props.text), [props.text]);
  return (
    <svg class="qr" role="img" aria-label={props.label} viewBox={`0 0 ${d.side} ${d.side}`}
      shape-rendering="crispEdges" data-testid="totp-qr">
      <rect width={d.side} height={d.side} fill="#fff" />
      <path d={d.path} fill="#000" />
    </svg>
  );
}

/**
 * Adding an authenticator app: the password, and a current code when the caller has a passkey
 * already (`codeKinds`, the kinds that code may be; absent when none is asked) (BeginTotp), then the QR code and the setup key with
 * the app's first code (ConfirmTotp). Nothing is stored before the code is confirmed; then
 * `onEnrolled` gets the password (to sign in again: the change ended every session) and the
 * recovery codes to show once. `level` is the heading level of the form's title.
 */
export function TotpEnrol(props: {
  level: 2 | 3;
  codeKinds?: readonly TypedFactor[];
  /** Whether the password field takes the focus when the form opens (default true). */
  focusOnOpen?: boolean;
  onEnrolled: (password: string, codes: readonly string[]) => void;
  onCancel?: () => void;
}) {
  const [password, setPassword] = useState("");
  // The current code of a factor the start asks for; `code` is the new app's first code.
  const [factorCode, setFactorCode] = useState("");
  const [code, setCode] = useState("");
  const [begun, setBegun] = useState<Begun | null>(null);
  const [errors, setErrors] = useState<Record<string, Msg>>({});
  const [busy, setBusy] = useState(false);
  const [copied, setCopied] = useState<Key | null>(null);
  const passwordField = useRef<HTMLInputElement>(null);
  const factorCodeField = useRef<HTMLInputElement>(null);
  const codeField = useRef<HTMLInputElement>(null);
  const scanHeading = useRef<HTMLHeadingElement>(null);
  const Title = `h${props.level}` as "h2" | "h3";
  const Sub = `h${props.level + 1}` as "h3" | "h4";

  // The password field when the form opens (unless the opener keeps the focus elsewhere); the
  // scan step's heading when it appears, so that it is read from its start.
  useEffect(() => {
    if (begun) scanHeading.current?.focus();
    else if (props.focusOnOpen !== false) passwordField.current?.focus();
  }, [begun !== null]);

  async function start(ev: Event) {
    ev.preventDefault();
    const asked = !!props.codeKinds;
    const e = checkEnrol(password, factorCode, asked);
    setErrors(e);
    if (e.password) return passwordField.current?.focus();
    if (e.code) return factorCodeField.current?.focus();
    setBusy(true);
    try {
      const r = await api.beginTotp({ password, code: asked ? factorCode.trim() : "" });
      // The code was used up: a new start needs another one.
      setFactorCode("");
      setBegun({ secret: r.secret, uri: r.otpauthUri, ticket: r.ticket });
    } catch (err) {
      const m = refusal(err);
      setErrors({ form: m });
      // A refused code was counted (or used): the next attempt needs another one.
      if (asked && codeRefused(m)) {
        setFactorCode("");
        factorCodeField.current?.focus();
      }
    }
    setBusy(false);
  }

  async function confirm(ev: Event) {
    ev.preventDefault();
    if (!begun) return;
    const missing = checkTotpCode(code);
    if (missing) {
      setErrors({ code: missing });
      return codeField.current?.focus();
    }
    setErrors({});
    setBusy(true);
    try {
      const r = await api.confirmTotp({ ticket: begun.ticket, code: normalizeTotpCode(code) });
      setBegun(null);
      props.onEnrolled(password, r.recoveryCodes);
    } catch (err) {
      const m = refusal(err);
      setErrors({ form: m });
      setCode("");
      setBusy(false);
      // A ticket that expired or no longer holds: back to the password, with the reason.
      if (m.key === "refusedEnrolExpired") setBegun(null);
      else codeField.current?.focus();
    }
  }

  const copyKey = async () => {
    if (!begun) return;
    try {
      await navigator.clipboard.writeText(begun.secret);
      setCopied("copied");
    } catch {
      setCopied("copyFailed");
    }
  };

  const formError = errors.form && <p class="error" role="alert">{S.refused + t(errors.form)}</p>;
  const cancel = props.onCancel && (
    <button type="button" onClick={props.onCancel} disabled={busy}>{S.cancel}</button>
  );

  if (!begun) {
    return (
      <form class="card" onSubmit={start} noValidate aria-labelledby="enrol-title" data-testid="totp-enrol">
        <Title id="enrol-title">{S.enrolTitle}</Title>
        {formError}
        <p>{S.enrolPasswordText}</p>
        {props.codeKinds && <p class="muted">{S.addFactorCodeText}</p>}
        <label>
          {S.currentPassword}
          <input ref={passwordField} name="password" type="password" autoComplete="current-password" value={password}
            aria-invalid={!!errors.password} aria-describedby={errors.password ? "enrol-password-error" : undefined}
            onInput={(e) => setPassword((e.target as HTMLInputElement).value)} />
        </label>
        {errors.password && <p class="field-error" id="enrol-password-error">{t(errors.password)}</p>}
        {props.codeKinds && (
          <CodeField id="enrol-factor" kinds={props.codeKinds} value={factorCode} error={errors.code}
            inputRef={factorCodeField} onInput={setFactorCode} />
        )}
        <div class="buttons">
          <button type="submit" class="primary" disabled={busy}>{busy ? S.working : S.continue}</button>
          {cancel}
        </div>
      </form>
    );
  }

  const described = [errors.code ? "enrol-code-error" : "", "enrol-code-hint"].filter(Boolean).join(" ");
  return (
    <form class="card" onSubmit={confirm} noValidate aria-labelledby="enrol-title" data-testid="totp-enrol">
      <Title id="enrol-title">{S.enrolTitle}</Title>
      <Sub id="scan-title" ref={scanHeading} tabIndex={-1}>{S.enrolScanTitle}</Sub>
      <p>{S.enrolScanText}</p>
      <QrCode text={begun.uri} label={S.qrLabel} />
      <p class="setup-key">
        <span>{S.setupKey}: </span>
        <code data-testid="totp-secret" translate={false}>{groupSecret(begun.secret)}</code>
      </p>
      <div class="buttons">
        <button type="button" onClick={copyKey}>{S.copyKey}</button>
      </div>
      <p class={copied === "copyFailed" ? "error" : "notice"} role="status">{copied ? S[copied] : ""}</p>
      {formError}
      <label>
        {S.enrolCodeLabel}
        <input ref={codeField} name="code" autoComplete="one-time-code" inputMode="numeric" autoCapitalize="none"
          spellcheck={false} maxLength={TOTP_DIGITS + 4} value={code} aria-invalid={!!errors.code}
          aria-describedby={described} onInput={(e) => setCode((e.target as HTMLInputElement).value)} />
      </label>
      {errors.code && <p class="field-error" id="enrol-code-error">{t(errors.code)}</p>}
      <p class="muted" id="enrol-code-hint">{S.enrolCodeHint}</p>
      <div class="buttons">
        <button type="submit" class="primary" disabled={busy}>{busy ? S.working : S.addApp}</button>
        {cancel}
      </div>
    </form>
  );
}

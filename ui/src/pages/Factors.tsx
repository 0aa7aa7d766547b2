import type { ComponentChildren } from "preact";
import { useRef, useState } from "preact/hooks";
import { S, countOf, fmt, formatDateTime, t, type Msg } from "../strings";
import { FactorKind, type Factors, type WhoAmIResponse } from "../gen/ichor/v1alpha1/user_pb";
import { api } from "../lib/api";
import { session } from "../lib/session";
import {
  hasRealFactor, methodRows, removalEffect, typedKinds, type MethodRow, type Removal,
} from "../lib/ownFactors";
import { FactorChange } from "./FactorChange";
import { RecoveryCodes } from "./RecoveryCodes";
import { SignInAgain } from "./SignInAgain";
import { TotpEnrol } from "./TotpEnrol";
import { PasskeyEnrol } from "./PasskeyEnrol";
import { passkeysAvailable } from "../lib/webauthn";

/**
 * What follows a change of the caller's factors, which ended every session of the user: the
 * recovery codes, when the change made some, in their dialog; then the tab signs in again with
 * the password. `changed` starts it; `view` is what to show meanwhile (null before).
 */
function useAfterChange(name: string, onSignedOut: () => void) {
  const [codes, setCodes] = useState<{ password: string; codes: readonly string[] } | null>(null);
  const [again, setAgain] = useState<string | null>(null);
  const changed = (password: string, made: readonly string[]) => {
    // The tab's tokens were revoked with the rest: dropped now, so that no refresh of them ends
    // the page (and takes the codes with it) while the dialog is open.
    session.clear();
    if (made.length) setCodes({ password, codes: made });
    else setAgain(password);
  };
  let view: ComponentChildren = null;
  if (again !== null) {
    view = (
      <SignInAgain name={name} password={again} notice={S.signInAgainNotice} passkeyNotice={S.signInAgainPasskeyNotice}
        onSignedOut={onSignedOut} />
    );
  } else if (codes) {
    view = (
      <>
        <p class="notice" role="status">{S.changeSaved}</p>
        <RecoveryCodes name={name} codes={codes.codes} onDone={() => setAgain(codes.password)} />
      </>
    );
  }
  return { changed, view };
}

/** The title of a factor as listed. */
function title(row: MethodRow): string {
  switch (row.kind) {
    case "totp":
      return S.factorApp;
    case "recovery":
      return S.factorRecovery;
    case "passkey":
      return fmt(S.factorPasskey, { name: row.name }) +
        [row.synced ? S.factorSynced : "", row.cloned ? S.factorDisabled : ""].filter(Boolean).map((s) => ` (${s})`).join("");
  }
}

/** The dates and counts of a factor as listed. */
function details(row: MethodRow): string[] {
  const at = (ms: number | null, template: string) => (ms === null ? [] : [fmt(template, { time: formatDateTime(ms) })]);
  switch (row.kind) {
    case "totp":
      return at(row.createdAt, S.factorAdded);
    case "recovery":
      return [
        row.remaining > 0 ? countOf(row.remaining, S.recoveryLeftOne, S.recoveryLeftOther) : S.recoveryNoneLeft,
        ...at(row.createdAt, S.recoveryMade),
      ];
    case "passkey":
      return [...at(row.createdAt, S.factorAdded), ...(row.lastUsedAt === null ? [S.factorNeverUsed] : at(row.lastUsedAt, S.factorLastUsed))];
  }
}

/** The title of the factor a removal names, in the language of the moment. */
function removalTitle(r: Removal): string {
  if (r.kind === "passkey") return fmt(S.factorPasskey, { name: r.name });
  return r.kind === "totp" ? S.factorApp : S.factorRecovery;
}

/** The removal a row's Remove button asks for. */
function removalOf(row: MethodRow): Removal {
  return row.kind === "passkey" ? { kind: "passkey", id: row.id, name: row.name } : { kind: row.kind };
}

const KINDS = { totp: FactorKind.TOTP, recovery: FactorKind.RECOVERY, passkey: FactorKind.PASSKEY } as const;

type Action = { kind: "enrol" } | { kind: "passkey" } | { kind: "regenerate" } | { kind: "remove"; removal: Removal };

/** The most passkeys a user may have (the issuer refuses more). */
const MAX_PASSKEYS = 10;

/**
 * The account page's "Sign-in methods": the caller's second factors (kinds, dates, recovery
 * codes left; `factors`, null until read, and `error`, the refusal of the read, come from the
 * page), adding a passkey or an authenticator app, new recovery codes and removing a factor. Every
 * change ends all the user's sessions; the tab then signs in again (`onSignedOut` when it cannot).
 */
export function SignInMethods(props: {
  me: WhoAmIResponse;
  factors: Factors | null;
  error: Msg | null;
  onSignedOut: () => void;
}) {
  const { factors, error } = props;
  const [action, setAction] = useState<Action | null>(null);
  const opener = useRef<HTMLElement | null>(null);
  const after = useAfterChange(props.me.name, props.onSignedOut);

  const open = (a: Action) => {
    opener.current = document.activeElement instanceof HTMLElement ? document.activeElement : null;
    setAction(a);
  };
  // Cancelled: the focus goes back to the button that opened the form.
  const cancel = () => {
    setAction(null);
    setTimeout(() => opener.current?.focus(), 0);
  };

  const heading = <h2 id="factors-title">{S.factorsTitle}</h2>;
  if (after.view) {
    return <section class="stack" aria-labelledby="factors-title">{heading}{after.view}</section>;
  }

  const rows = methodRows(factors);
  const busy = action !== null;
  const kinds = typedKinds(factors);
  // Offered where the browser can make one; an issuer reached by an IP address refuses, and says so.
  const passkeyOffered = !!factors && passkeysAvailable() && factors.passkeys.length < MAX_PASSKEYS;
  // Adding a factor beside an app or a passkey takes a current code too.
  const codeKinds = hasRealFactor(factors) ? kinds : undefined;
  let panel: ComponentChildren = null;
  if (action?.kind === "enrol") {
    panel = <TotpEnrol level={3} codeKinds={codeKinds} onEnrolled={after.changed} onCancel={cancel} />;
  } else if (action?.kind === "passkey") {
    panel = <PasskeyEnrol level={3} codeKinds={codeKinds} onEnrolled={after.changed} onCancel={cancel} />;
  } else if (action?.kind === "regenerate") {
    panel = (
      <FactorChange title={S.regenerateCodes} text={S.regenerateText} submit={S.regenerateCodes} kinds={kinds}
        run={async (password, code) => (await api.regenerateRecoveryCodes({ password, code })).recoveryCodes}
        onDone={after.changed} onCancel={cancel} />
    );
  } else if (action?.kind === "remove") {
    const r = action.removal;
    panel = (
      <FactorChange title={fmt(S.removeWhat, { what: removalTitle(r) })} text={S[removalEffect(factors, r)]} submit={S.remove}
        danger kinds={kinds}
        run={async (password, code) => {
          await api.removeFactor({ password, code, kind: KINDS[r.kind], passkeyId: r.kind === "passkey" ? r.id : "" });
          return [];
        }}
        onDone={after.changed} onCancel={cancel} />
    );
  }

  return (
    <section class="stack" aria-labelledby="factors-title" data-testid="sign-in-methods">
      <div class="card">
        {heading}
        {error && <p class="error" role="alert">{S.refused + t(error)}</p>}
        {factors && <p class="muted">{hasRealFactor(factors) ? S.factorsIntro : S.factorsNone}</p>}
        {rows.length > 0 && (
          <ul class="methods">
            {rows.map((row) => (
              <li key={row.kind === "passkey" ? row.id : row.kind} data-factor={row.kind}>
                <div>
                  <strong>{title(row)}</strong>
                  {row.kind === "passkey" && row.cloned && (
                    <span class="warning" data-testid="passkey-cloned">
                      {S.factorClonedText}
                      {row.clonedAt !== null && " " + fmt(S.factorClonedAt, { time: formatDateTime(row.clonedAt) })}
                    </span>
                  )}
                  {details(row).map((d) => <span class="muted" key={d}>{d}</span>)}
                </div>
                <div class="buttons">
                  {row.kind === "recovery" && hasRealFactor(factors) && (
                    <button type="button" disabled={busy} onClick={() => open({ kind: "regenerate" })}>{S.regenerateCodes}</button>
                  )}
                  <button type="button" class="danger" disabled={busy} aria-label={fmt(S.removeWhat, { what: title(row) })}
                    onClick={() => open({ kind: "remove", removal: removalOf(row) })}>
                    {S.remove}
                  </button>
                </div>
              </li>
            ))}
          </ul>
        )}
        {factors && (passkeyOffered || !factors.totp) && (
          <div class="buttons">
            {passkeyOffered && (
              <button type="button" class="primary" disabled={busy} onClick={() => open({ kind: "passkey" })}>{S.addPasskey}</button>
            )}
            {!factors.totp && (
              <button type="button" class={passkeyOffered ? undefined : "primary"} disabled={busy}
                onClick={() => open({ kind: "enrol" })}>{S.setUpApp}</button>
            )}
          </div>
        )}
      </div>
      {panel}
    </section>
  );
}

/**
 * The screen of a user whom the second-factor policy requires to enrol: nothing but setting up
 * an authenticator app or adding a passkey (every other call is refused until then), the
 * language and signing out.
 */
export function MustEnrol(props: { me: WhoAmIResponse; onSignedOut: () => void; extra?: ComponentChildren }) {
  const after = useAfterChange(props.me.name, props.onSignedOut);
  const [passkey, setPasskey] = useState(false);
  // Back from the passkey form: the focus returns to the button that opened it, not to the
  // app's form.
  const [back, setBack] = useState(false);
  const other = useRef<HTMLButtonElement>(null);
  const enrol = passkey
    ? <PasskeyEnrol level={2} onEnrolled={after.changed} onCancel={() => {
      setPasskey(false);
      setBack(true);
      setTimeout(() => other.current?.focus(), 0);
    }} />
    : (
      <>
        <TotpEnrol level={2} focusOnOpen={!back} onEnrolled={after.changed} />
        {passkeysAvailable() && (
          <button ref={other} type="button" class="start" onClick={() => setPasskey(true)}>{S.addPasskeyInstead}</button>
        )}
      </>
    );
  return (
    <main class="center">
      <div class="stack narrow">
        <h1>{S.mustEnrolTitle}</h1>
        <p>{S.mustEnrolText}</p>
        {after.view ?? enrol}
        <button type="button" class="start" onClick={() => void session.signOut()}>{S.signOut}</button>
        {props.extra}
      </div>
    </main>
  );
}

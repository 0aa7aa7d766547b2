import { useEffect, useState } from "preact/hooks";
import { S, fmt, formatDateTime, t, type Msg } from "../strings";
import type { Factors, WhoAmIResponse } from "../gen/ichor/v1alpha1/user_pb";
import { api, refusal } from "../lib/api";
import { session } from "../lib/session";
import { ChangePassword } from "./ChangePassword";
import { externalProvider, isExternalSession } from "../lib/external";
import { TrustWarning } from "./SignIn";
import { SignInMethods } from "./Factors";

/** Saves the caller's kubeconfig as a file. */
export async function downloadKubeconfig(name: string): Promise<void> {
  const { kubeconfig } = await api.getMyKubeconfig({ caFile: "" });
  const url = URL.createObjectURL(new Blob([kubeconfig], { type: "application/yaml" }));
  const a = document.createElement("a");
  a.href = url;
  a.download = `kubeconfig-${name.replace(/[^A-Za-z0-9._@-]/g, "_")}.yaml`;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** Ends every session of the caller, then signs this tab out. */
export async function signOutEverywhere(name: string): Promise<void> {
  await api.revokeSessions({ name });
  await session.signOut();
}

/** The account menu in the header: who am I and the session's actions. */
export function AccountMenu(props: { me: WhoAmIResponse; go: (path: string) => void }) {
  const [open, setOpen] = useState(false);
  const [error, setError] = useState<Msg | null>(null);
  const external = isExternalSession(session.idToken());
  const run = (f: () => Promise<void>) => async () => {
    setError(null);
    try {
      await f();
    } catch (e) {
      setError(refusal(e));
    }
  };
  return (
    <div class="menu">
      <button type="button" aria-expanded={open} onClick={() => setOpen(!open)}>
        <span class="sr-only">{S.menu}: </span>
        {props.me.displayName || props.me.name}
        <span aria-hidden="true"> ▾</span>
      </button>
      {open && (
        <div class="menu-panel" role="menu">
          <p>
            {S.signedInAs} <strong>{props.me.name}</strong>
          </p>
          <p class="muted">
            {S.roles}: {props.me.roles.join(S.listSeparator) || S.noRoles}
          </p>
          {error && <p class="error" role="alert">{S.refused + t(error)}</p>}
          <button type="button" role="menuitem" onClick={() => { setOpen(false); props.go("/account"); }}>
            {external ? S.account : S.changePassword}
          </button>
          <button type="button" role="menuitem" onClick={run(() => downloadKubeconfig(props.me.name))}>
            {S.downloadKubeconfig}
          </button>
          <button type="button" role="menuitem" onClick={run(() => session.signOut())}>
            {S.signOut}
          </button>
          {/* RevokeSessions needs `update` on ichorusers and ichorusers/password, which only the
              admin role has, even for the caller's own sessions. */}
          {props.me.roles.includes("admin") && (
            <button type="button" role="menuitem" onClick={run(() => signOutEverywhere(props.me.name))}>
              {S.signOutEverywhere}
            </button>
          )}
        </div>
      )}
    </div>
  );
}

/**
 * The account page: who am I, the kubeconfig, the sign-in methods and the password change (which
 * asks for a code of a factor when the caller has one, so both read the caller's factors).
 */
export function Account(props: { me: WhoAmIResponse; onSignedOut: () => void }) {
  const [error, setError] = useState<Msg | null>(null);
  const [done, setDone] = useState(false);
  const [warning, setWarning] = useState<string | null>(null);
  const [factors, setFactors] = useState<Factors | null>(null);
  const [factorsError, setFactorsError] = useState<Msg | null>(null);
  const external = isExternalSession(session.idToken());
  useEffect(() => {
    if (external) void externalProvider().then((x) => setWarning(x.warning));
    else api.listOwnFactors({}).then((r) => setFactors(r.factors ?? null), (e) => setFactorsError(refusal(e)));
  }, [external]);
  const times = session.times();
  return (
    <section class="stack">
      <h1>{S.account}</h1>
      <div class="card">
        <p>
          {S.signedInAs} <strong>{props.me.name}</strong>
          {props.me.displayName && ` (${props.me.displayName})`}
        </p>
        {props.me.email && <p class="muted">{props.me.email}</p>}
        <p>
          {S.roles}: {props.me.roles.join(S.listSeparator) || S.noRoles}
        </p>
        {times && (
          <p class="muted" data-testid="session-times">
            {fmt(S.signedInSince, { time: formatDateTime(times.since) })}{" "}
            {fmt(S.sessionEndsBy, { time: formatDateTime(times.until) })}
          </p>
        )}
        {error && <p class="error" role="alert">{S.refused + t(error)}</p>}
        {done && <p class="notice" role="status">{S.kubeconfigReady}</p>}
        <button type="button" class="primary" onClick={async () => {
          setError(null);
          try {
            await downloadKubeconfig(props.me.name);
            setDone(true);
          } catch (e) {
            setError(refusal(e));
          }
        }}>
          {S.downloadKubeconfig}
        </button>
      </div>
      {warning !== null && <TrustWarning reason={warning} />}
      {!external && <SignInMethods me={props.me} factors={factors} error={factorsError} onSignedOut={props.onSignedOut} />}
      {external
        ? <p class="muted" data-testid="external-password">{S.externalPassword}</p>
        : <ChangePassword factors={factors} onSignedOut={props.onSignedOut} />}
    </section>
  );
}

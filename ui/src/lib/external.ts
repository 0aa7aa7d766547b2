// The site's own identity provider (the `external` provider of /auth/config): a full-page
// redirect to its authorization endpoint (code flow, PKCE S256, state, nonce), back to
// /auth/callback, the code exchanged with fetch at its token endpoint (the provider allows this
// origin by the client's redirect URI). What must survive the two navigations (verifier, state,
// nonce, endpoints) is kept in sessionStorage under PENDING_KEY and removed when the answer is
// read, whether it is accepted or not: one answer per request. No refresh token is asked for:
// the provider's own session and policy decide how long its people stay signed in, and the tab
// signs in again when the ID token ends.

import { msg } from "../strings";
import { claims } from "./jwt";
import { SignInError, checkRedirect, get, post, type AuthConfig, type Discovery, type Provider } from "./login";
import { challengeS256, randomToken } from "./pkce";
import { session } from "./session";

export const PENDING_KEY = "ichor.external.pending";
/** The scope asked of the provider: the claims Ichor's API and the kube-apiserver map. */
export const EXTERNAL_SCOPE = "openid email profile groups";

/** A sign-in in flight, kept across the redirect. */
export interface Pending {
  state: string;
  nonce: string;
  verifier: string;
  issuer: string;
  tokenEndpoint: string;
  clientId: string;
  redirectUri: string;
}

/** The external provider of `config`, if one is configured. */
export function externalOf(config: AuthConfig): Provider | null {
  return config.providers.find((p) => p.id === "external") ?? null;
}

/**
 * The reason to warn that the cluster's kube-apiserver does not trust the external provider as
 * Ichor's API maps it (kubectl would refuse its people or name them differently), or null. Pure.
 */
export function trustWarning(config: AuthConfig): string | null {
  if (!externalOf(config) || config.externalTrust?.status !== "differs") return null;
  return config.externalTrust.reason ?? "";
}

/** /auth/config's external provider and the trust warning, or nothing (also when unreadable). */
export async function externalProvider(): Promise<{ provider: Provider | null; warning: string | null }> {
  try {
    const config = await get<AuthConfig>("/auth/config");
    return { provider: externalOf(config), warning: trustWarning(config) };
  } catch {
    return { provider: null, warning: null };
  }
}

/** The authorization request URL. Pure. */
export function authorizeUrl(endpoint: string, p: Pending, challenge: string): string {
  const url = new URL(endpoint);
  const q = new URLSearchParams({
    response_type: "code",
    client_id: p.clientId,
    redirect_uri: p.redirectUri,
    scope: EXTERNAL_SCOPE,
    state: p.state,
    nonce: p.nonce,
    code_challenge: challenge,
    code_challenge_method: "S256",
  });
  for (const [k, v] of q) url.searchParams.set(k, v);
  return url.href;
}

/** Starts the redirect to `provider` (the page navigates away). */
export async function startExternalSignIn(
  provider: Provider,
  storage: Storage = sessionStorage,
  navigate: (url: string) => void = (u) => location.assign(u),
): Promise<void> {
  const d = await get<Discovery>(`${provider.issuer.replace(/\/$/, "")}/.well-known/openid-configuration`);
  if (d.issuer !== provider.issuer) throw new SignInError(msg("badToken"));
  const pending: Pending = {
    state: randomToken(16),
    nonce: randomToken(16),
    verifier: randomToken(32),
    issuer: d.issuer,
    tokenEndpoint: d.token_endpoint,
    clientId: provider.clientId,
    redirectUri: `${location.origin}/auth/callback`,
  };
  storage.setItem(PENDING_KEY, JSON.stringify(pending));
  navigate(authorizeUrl(d.authorization_endpoint, pending, await challengeS256(pending.verifier)));
}

/** The pending sign-in, removed from `storage` (one answer per request). */
export function takePending(storage: Storage): Pending | null {
  const raw = storage.getItem(PENDING_KEY);
  storage.removeItem(PENDING_KEY);
  if (!raw) return null;
  try {
    const p = JSON.parse(raw) as Pending;
    return typeof p.state === "string" && typeof p.verifier === "string" && typeof p.tokenEndpoint === "string"
      ? p
      : null;
  } catch {
    return null;
  }
}

/**
 * Checks the provider's answer at /auth/callback (`returned`, the full URL) against `pending`:
 * this page's redirect URI, its state, the `iss` of RFC 9207 when present. The code. Pure.
 */
export function codeOf(returned: string, pending: Pending): string {
  const code = checkRedirect(returned, pending.redirectUri, pending.state);
  const iss = new URL(returned).searchParams.get("iss");
  if (iss !== null && iss !== pending.issuer) throw new SignInError(msg("badState"));
  return code;
}

/** Whether `token` is a valid answer to `pending`: its issuer, audience and nonce. Pure. */
export function tokenMatches(token: string, pending: Pending): boolean {
  const c = claims(token);
  const aud = c?.aud;
  const audOk = aud === pending.clientId || (Array.isArray(aud) && aud.includes(pending.clientId));
  return !!c && c.iss === pending.issuer && c.nonce === pending.nonce && audOk;
}

/** Completes the sign-in the provider redirected back to `returned`; stores the ID token. */
export async function completeExternalSignIn(returned: string, storage: Storage = sessionStorage): Promise<void> {
  const pending = takePending(storage);
  if (!pending) throw new SignInError(msg("externalNoPending"));
  const code = codeOf(returned, pending);
  const tokens = await post<{ id_token: string }>(pending.tokenEndpoint, {
    headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code,
      redirect_uri: pending.redirectUri,
      client_id: pending.clientId,
      code_verifier: pending.verifier,
    }).toString(),
  });
  if (!tokens.id_token || !tokenMatches(tokens.id_token, pending)) throw new SignInError(msg("badToken"));
  session.clear();
  session.store(tokens.id_token, null);
}

/** Whether the stored session came from another issuer than this origin's (Ichor's own). */
export function isExternalSession(token: string | null, origin: string = location.origin): boolean {
  const iss = token ? claims(token)?.iss : undefined;
  if (typeof iss !== "string") return false;
  try {
    return new URL(iss).origin !== origin;
  } catch {
    return false;
  }
}

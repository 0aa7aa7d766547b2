// The in-page sign-in (seed amendment 2026-10-29): authorize with `Accept: application/json`
// answers a ticket, the ticket and credentials go to /oidc/login, whose `redirect_uri` must be
// this page's /auth/callback with this page's state; the code is exchanged with fetch. The PKCE
// verifier, state and nonce stay in memory (local variables of one call).

import { msg, t, type Msg } from "../strings";
import { signInRefusal } from "./refusal";
import { claims, stringClaim } from "./jwt";
import { challengeS256, randomToken } from "./pkce";
import { session } from "./session";

export interface Provider {
  id: string;
  issuer: string;
  clientId: string;
}

export interface AuthConfig {
  providers: Provider[];
  apiRequiresToken: boolean;
  /** Whether the cluster's kube-apiserver trusts the external provider as Ichor's API maps it. */
  externalTrust?: { status: "matches" | "differs" | "unknown"; reason?: string };
}

/** The parts of a discovery document the sign-ins use. */
export interface Discovery {
  issuer: string;
  authorization_endpoint: string;
  token_endpoint: string;
  revocation_endpoint?: string;
}

/** A sign-in refusal with the message to show. */
export class SignInError extends Error {
  constructor(readonly msg: Msg) {
    super(t(msg));
  }
}

async function json<T>(response: Response): Promise<T> {
  const text = await response.text();
  let body: unknown = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (!response.ok) {
    const b = (body ?? {}) as { error?: string; error_description?: string };
    const retry = Number.parseInt(response.headers.get("retry-after") ?? "", 10);
    throw new SignInError(
      signInRefusal(response.status, b.error ?? "", b.error_description ?? "", Number.isFinite(retry) ? retry : null),
    );
  }
  return body as T;
}

/** GET `url` as JSON; a refusal or a network failure is a [`SignInError`]. */
export async function get<T>(url: string): Promise<T> {
  let r: Response;
  try {
    r = await fetch(url, { headers: { accept: "application/json" } });
  } catch {
    throw new SignInError(msg("network"));
  }
  return json<T>(r);
}

/** POST to `url`, answer as JSON; a refusal or a network failure is a [`SignInError`]. */
export async function post<T>(url: string, init: RequestInit): Promise<T> {
  let r: Response;
  try {
    r = await fetch(url, { method: "POST", ...init });
  } catch {
    throw new SignInError(msg("network"));
  }
  return json<T>(r);
}

/** The `ichor` provider of `/auth/config`. */
export async function ichorProvider(): Promise<Provider> {
  const config = await get<AuthConfig>("/auth/config");
  const p = config.providers.find((x) => x.id === "ichor");
  if (!p) throw new SignInError(msg("noIchorSignIn"));
  return p;
}

/** Whether `returned` is exactly `expected` (origin and path) carrying `state` and a code. */
export function checkRedirect(returned: string, expected: string, state: string): string {
  let url: URL;
  try {
    url = new URL(returned);
  } catch {
    throw new SignInError(msg("badRedirect"));
  }
  if (`${url.origin}${url.pathname}` !== expected) throw new SignInError(msg("badRedirect"));
  const error = url.searchParams.get("error");
  if (error) throw new SignInError(msg("refusedOther", { detail: url.searchParams.get("error_description") || error }));
  if (url.searchParams.get("state") !== state) throw new SignInError(msg("badState"));
  const code = url.searchParams.get("code");
  if (!code) throw new SignInError(msg("badState"));
  return code;
}

/** Signs in with a user name and password; stores the tokens on success. */
export async function signIn(username: string, password: string): Promise<void> {
  const provider = await ichorProvider();
  const d = await get<Discovery>(`${provider.issuer}/.well-known/openid-configuration`);
  const verifier = randomToken(32);
  const state = randomToken(16);
  const nonce = randomToken(16);
  const redirectUri = `${location.origin}/auth/callback`;
  const q = new URLSearchParams({
    response_type: "code",
    client_id: provider.clientId,
    redirect_uri: redirectUri,
    scope: "openid profile email offline_access",
    state,
    nonce,
    code_challenge: await challengeS256(verifier),
    code_challenge_method: "S256",
  });
  const { ticket } = await get<{ ticket: string }>(`${d.authorization_endpoint}?${q}`);
  const { redirect_uri } = await post<{ redirect_uri: string }>(new URL("/oidc/login", provider.issuer).href, {
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify({ ticket, username, password }),
  });
  const code = checkRedirect(redirect_uri, redirectUri, state);
  const tokens = await post<{ id_token: string; refresh_token?: string }>(d.token_endpoint, {
    headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code,
      redirect_uri: redirectUri,
      client_id: provider.clientId,
      code_verifier: verifier,
    }).toString(),
  });
  const c = claims(tokens.id_token);
  const aud = c?.aud;
  const audOk = aud === provider.clientId || (Array.isArray(aud) && aud.includes(provider.clientId));
  if (!c || c.nonce !== nonce || c.iss !== d.issuer || !audOk) throw new SignInError(msg("badToken"));
  session.clear();
  session.store(
    tokens.id_token,
    tokens.refresh_token
      ? {
          refreshToken: tokens.refresh_token,
          tokenEndpoint: d.token_endpoint,
          revocationEndpoint: d.revocation_endpoint,
          clientId: provider.clientId,
        }
      : null,
  );
  await session.claimFamily();
}

/**
 * After a password change (which ended every session of the user): signs in again with the new
 * password, the user name taken from the stored token's `sub`. Clears the tokens on failure.
 */
export async function signInAgain(newPassword: string): Promise<boolean> {
  const token = session.idToken();
  const name = token ? stringClaim(token, "sub") : "";
  try {
    if (!name) return false;
    await signIn(name, newPassword);
    return true;
  } catch {
    session.clear();
    return false;
  }
}

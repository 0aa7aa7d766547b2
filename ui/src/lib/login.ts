// The in-page sign-in (seed amendment 2026-10-29): authorize with `Accept: application/json`
// answers a ticket, the ticket and credentials go to /oidc/login, whose `redirect_uri` must be
// this page's /auth/callback with this page's state; the code is exchanged with fetch. The PKCE
// verifier, state and nonce stay in memory (local variables of one call).

import { msg, t, type Msg } from "../strings";
import { factorRefusal, passkeyRefusal, signInRefusal } from "./refusal";
import { parseFactorChallenge, type TypedFactor } from "./factor";
import { claims, stringClaim } from "./jwt";
import { getPasskey } from "./webauthn";
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

/** How a refusal of an endpoint reads: the status, `error`, `error_description`, `Retry-After`. */
type Refusal = (status: number, error: string, description: string, retryAfter: number | null) => Msg;

async function json<T>(response: Response, refusal: Refusal = signInRefusal): Promise<T> {
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
      refusal(response.status, b.error ?? "", b.error_description ?? "", Number.isFinite(retry) ? retry : null),
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

/**
 * POST to `url`, answer as JSON; a refusal (read by `refusal`) or a network failure is a
 * [`SignInError`].
 */
export async function post<T>(url: string, init: RequestInit, refusal: Refusal = signInRefusal): Promise<T> {
  let r: Response;
  try {
    r = await fetch(url, { method: "POST", ...init });
  } catch {
    throw new SignInError(msg("network"));
  }
  return json<T>(r, refusal);
}

/**
 * A sign-in waiting for its second factor: the kinds the user may type, whether a passkey is
 * offered, and `verify`, which sends a code with the step's ticket, or `verifyPasskey`, which asks
 * the browser for the passkey's answer and sends it; when accepted, either finishes the sign-in as
 * the password would have (a refusal is a [`SignInError`], a cancelled or failed passkey prompt a
 * `PasskeyError`; the step can be tried again until the issuer says it is no longer valid). The
 * ticket, PKCE verifier, state and nonce stay inside.
 */
export interface FactorStep {
  readonly factors: readonly TypedFactor[];
  readonly passkey: boolean;
  verify(code: string): Promise<void>;
  verifyPasskey(): Promise<void>;
}

const JSON_POST = { "content-type": "application/json", accept: "application/json" };

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

/**
 * Signs in with a user name and password; stores the tokens on success. Resolves to null when
 * signed in, or to the second step when the user has a second factor.
 */
export async function signIn(username: string, password: string): Promise<FactorStep | null> {
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
  const answer = await post<{ redirect_uri?: unknown }>(new URL("/oidc/login", provider.issuer).href, {
    headers: JSON_POST,
    body: JSON.stringify({ ticket, username, password }),
  });

  // The code in the issuer's redirect, exchanged and checked; the tokens stored.
  const finish = async (returned: unknown): Promise<void> => {
    const code = checkRedirect(typeof returned === "string" ? returned : "", redirectUri, state);
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
  };

  const challenge = parseFactorChallenge(answer);
  if (!challenge) {
    await finish(answer?.redirect_uri);
    return null;
  }
  if (challenge.factors.length === 0 && challenge.passkeyOptions === null) {
    throw new SignInError(msg("factorUnsupported"));
  }
  const factorUrl = new URL("/oidc/login/factor", provider.issuer).href;
  const send = async (body: Record<string, unknown>, refusal: Refusal) => {
    const accepted = await post<{ redirect_uri?: unknown }>(factorUrl, {
      headers: JSON_POST,
      body: JSON.stringify({ factor_ticket: challenge.factorTicket, ...body }),
    }, refusal);
    await finish(accepted?.redirect_uri);
  };
  return {
    factors: challenge.factors,
    passkey: challenge.passkeyOptions !== null,
    verify: (code: string) => send({ code: code.trim() }, factorRefusal),
    async verifyPasskey() {
      if (challenge.passkeyOptions === null) throw new SignInError(msg("factorUnsupported"));
      const credential = await getPasskey(challenge.passkeyOptions);
      await send({ credential }, passkeyRefusal);
    },
  };
}

/**
 * After a password or second-factor change (which ended every session of the user): signs in
 * again with the (new) password, as `name` or else the user name of the stored token's `sub`.
 * True when signed in, the second step when the user has a second factor, false on a failure.
 * The stored tokens, which the change revoked, are cleared unless signed in.
 */
export async function signInAgain(newPassword: string, name = tokenSub()): Promise<boolean | FactorStep> {
  try {
    if (!name) return false;
    const step = await signIn(name, newPassword);
    if (!step) return true;
    // The change revoked the stored tokens: dropped now, so that no refresh of them fails (and
    // ends the page's session) while the user types the code.
    session.clear();
    return step;
  } catch {
    session.clear();
    return false;
  }
}

/** The user name of the stored ID token (its `sub`), or "" when none is stored. */
export function tokenSub(): string {
  const token = session.idToken();
  return token ? stringClaim(token, "sub") : "";
}

// The second step of a sign-in (docs/mfa.md): after the right password, a user with a second
// factor gets `{"factor_ticket", "factors", "passkey_options"?}` instead of a redirect, and the
// answer goes with that ticket to /oidc/login/factor: a passkey's (the browser's answer to
// `passkey_options`, offered first: it cannot be phished) or a typed code (an authenticator-app
// code or a recovery code).

import { msg, type Key, type Msg } from "../strings";
import { isRequestOptions } from "./webauthn";

/** The factor kinds this page takes, as the issuer names them. */
export const TYPED_FACTORS = ["totp", "recovery"] as const;
/** One of [`TYPED_FACTORS`]. */
export type TypedFactor = (typeof TYPED_FACTORS)[number];

/** The longest code the field takes (the issuer refuses longer ones as wrong codes). */
export const CODE_MAX = 64;

/**
 * The issuer's request for a second factor: the signed ticket, the typed kinds offered and, when
 * a passkey is offered, the options for `navigator.credentials.get` (the issuer's JSON).
 */
export interface FactorChallenge {
  factorTicket: string;
  factors: TypedFactor[];
  passkeyOptions: unknown | null;
}

/** The typed kinds of `raw` (an array of kind names), in this page's order; unknown ones dropped. */
export function typedFactors(raw: unknown): TypedFactor[] {
  if (!Array.isArray(raw)) return [];
  return TYPED_FACTORS.filter((f) => raw.includes(f));
}

/**
 * The passkey options of a second-factor request: `passkey_options` when `factors` offers a
 * passkey and the options are of the WebAuthn shape, else null.
 */
export function passkeyOptionsOf(factors: unknown, options: unknown): unknown | null {
  return Array.isArray(factors) && factors.includes("passkey") && isRequestOptions(options) ? options : null;
}

/**
 * The second-factor request in an answer of /oidc/login, or null when the answer is not one (no
 * `factor_ticket`). A request offering no kind this page takes has an empty `factors` and no
 * `passkeyOptions`.
 */
export function parseFactorChallenge(body: unknown): FactorChallenge | null {
  if (typeof body !== "object" || body === null) return null;
  const b = body as Record<string, unknown>;
  if (typeof b.factor_ticket !== "string" || b.factor_ticket === "") return null;
  return {
    factorTicket: b.factor_ticket,
    factors: typedFactors(b.factors),
    passkeyOptions: passkeyOptionsOf(b.factors, b.passkey_options),
  };
}

/** The hint under the code field: what to type, by the kinds the user has. */
export function codeHint(factors: readonly TypedFactor[]): Key {
  const app = factors.includes("totp");
  const recovery = factors.includes("recovery");
  if (app && recovery) return "codeHintBoth";
  return app ? "codeHintApp" : "codeHintRecovery";
}

/** Whether the field should ask for digits only (an authenticator app and no recovery code). */
export function digitsOnly(factors: readonly TypedFactor[]): boolean {
  return factors.includes("totp") && !factors.includes("recovery");
}

/** The check before posting: the code typed, or the message to show on the field. */
export function checkCode(code: string): Msg | null {
  return code.trim() === "" ? msg("enterCode") : null;
}

/** Whether a refusal of the second step means the sign-in must start again. */
export function mustStartAgain(m: Msg): boolean {
  return m.key === "factorExpired";
}

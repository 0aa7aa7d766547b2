// The server's refusals as the user reads them: a UserService status (code and the server's
// English sentence) or an OAuth error of the sign-in endpoints, turned into a message of the
// catalogs. A sentence the server may send that is not recognised is shown as the server wrote it.

import { msg, type Msg } from "../strings";

/** gRPC status codes the UserService answers with (the numbers of the gRPC spec). */
export const GrpcCode = {
  InvalidArgument: 3,
  NotFound: 5,
  AlreadyExists: 6,
  PermissionDenied: 7,
  ResourceExhausted: 8,
  FailedPrecondition: 9,
  Aborted: 10,
  Unavailable: 14,
  Unauthenticated: 16,
} as const;

const PATTERNS: [RegExp, (m: RegExpMatchArray) => Msg][] = [
  [/^change your password first$/, () => msg("refusedChangePasswordFirst")],
  [/^cannot disable, demote or delete the last enabled admin "([^"]+)"/, (m) => msg("refusedLastAdmin", { name: m[1] })],
  [/^you may not grant role "([^"]+)"/, (m) => msg("refusedGrant", { role: m[1] })],
  [/^user "([^"]+)" does not exist$/, (m) => msg("refusedNotFound", { name: m[1] })],
  [/^user "([^"]+)" exists already$/, (m) => msg("refusedExists", { name: m[1] })],
  [/^old_password: does not match/, () => msg("refusedWrongCurrent")],
  [/^no cluster is configured for kubeconfigs/, () => msg("refusedNoCluster")],
  [/ may not \S+ \S+.*: ask an administrator/, () => msg("refusedNotAllowed")],
  // The second-factor policy and the caller's own factors (BeginTotp, ConfirmTotp,
  // RegenerateRecoveryCodes, RemoveFactor).
  [/^set up a second factor first\b/, () => msg("refusedEnrolFirst")],
  [/^you have an authenticator app already/, () => msg("refusedTotpExists")],
  [/^recovery codes stand beside an authenticator app or a passkey/, () => msg("refusedNoRealFactor")],
  [/^user "[^"]+" has no password, so it has no second factors/, () => msg("refusedNoPasswordFactors")],
  [/^you signed in with your identity provider: Ichor holds no password or second factor/, () => msg("refusedExternalFactors")],
  [/^your password or second factors were changed concurrently/, () => msg("refusedFactorsChanged")],
  [/^code: too many wrong codes; wait (\d+) seconds/, (m) => msg("refusedCodeWait", { seconds: Number(m[1]) })],
  [/^code: is incorrect or was used already/, () => msg("wrongCode")],
  [/^code: is not the authenticator app's current code/, () => msg("refusedTotpNotCurrent")],
  [/^code: required/, () => msg("enterCode")],
  [/^password: does not match your current password/, () => msg("refusedWrongCurrent")],
  [/^password: is required/, () => msg("enterCurrent")],
  [/^ticket: (has expired|is no longer valid|is not a valid enrolment ticket|was not made for you|holds no usable secret)/,
    () => msg("refusedEnrolExpired")],
  [/^(kind|passkey_id): you have no /, () => msg("refusedFactorGone")],
  // Adding a passkey (BeginPasskeyRegistration, FinishPasskeyRegistration).
  [/^passkeys need the issuer to be reached by a domain name/, () => msg("refusedPasskeyNeedsDomain")],
  [/^credential_json: the passkey could not be verified for this site/, () => msg("refusedPasskeyNotVerified")],
  [/^ticket: is not a valid registration ticket/, () => msg("refusedEnrolExpired")],
  [/^you have (\d+) passkeys already/, (m) => msg("refusedTooManyPasskeys", { count: Number(m[1]) })],
  [/^this passkey is registered already/, () => msg("passkeyExists")],
  [/^too many wrong passwords for this account or from this address: try again in (\d+) s/,
    (m) => msg("refusedPasswordWait", { seconds: Number(m[1]) })],
  [/^the password checks of this server are busy: try again in (\d+) s/,
    (m) => msg("signInBusy", { seconds: Number(m[1]) })],
];

/** A UserService refusal (`code`, the server's `message`) as a message of the catalogs. */
export function apiRefusal(code: number, message: string): Msg {
  for (const [re, make] of PATTERNS) {
    const m = message.match(re);
    if (m) return make(m);
  }
  switch (code) {
    case GrpcCode.Unauthenticated:
      return msg("refusedSignedOut");
    case GrpcCode.PermissionDenied:
      return msg("refusedNotAllowed");
    case GrpcCode.Aborted:
      return msg("refusedConflict");
    case GrpcCode.Unavailable:
      return msg("refusedUnavailable");
    case GrpcCode.InvalidArgument:
      return msg("refusedInvalid", { detail: message });
    default:
      return msg("refusedOther", { detail: message });
  }
}

/**
 * An OAuth error answer of the sign-in endpoints (HTTP `status`, `error`, `error_description`,
 * the `Retry-After` seconds when sent) as a message of the catalogs.
 */
export function signInRefusal(status: number, error: string, description: string, retryAfter: number | null): Msg {
  const seconds = retryAfter ?? 5;
  if (status === 401 && error === "access_denied") return msg("wrongCredentials");
  if (status === 403 && /disabled/i.test(description)) return msg("accountDisabled");
  // The policy's refusals of a Kubernetes token (the CLI's sign-in).
  if (status === 403 && /set up a second factor/i.test(description)) return msg("mustEnrolForKube");
  if (status === 403 && /change your password/i.test(description)) return msg("mustChangeForKube");
  if (status === 429) return msg("tooManyAttempts", { seconds });
  if (status === 503 && /busy/i.test(description)) return msg("signInBusy", { seconds });
  if (status === 503) return msg("signInUnavailable");
  if (status === 400 && /sign-in request has expired or is invalid/i.test(description)) return msg("signInExpired");
  return msg("refusedOther", { detail: description || error || `HTTP ${status}` });
}

/**
 * A refusal of the second step (`/oidc/login/factor`) as a message of the catalogs: a wrong or
 * used code, the limit (with the `Retry-After` seconds), a ticket that expired or a sign-in that
 * changed since the password (a password or factor reset): start again.
 */
export function factorRefusal(status: number, error: string, description: string, retryAfter: number | null): Msg {
  if (status === 401 && error === "access_denied") return msg("wrongCode");
  if (status === 400 && /expired or is invalid|no longer valid/i.test(description)) return msg("factorExpired");
  return signInRefusal(status, error, description, retryAfter);
}

/** A refusal of a passkey's answer at the second step: as a code's, but a refused answer says so. */
export function passkeyRefusal(status: number, error: string, description: string, retryAfter: number | null): Msg {
  const m = factorRefusal(status, error, description, retryAfter);
  return m.key === "wrongCode" ? msg("passkeyRefused") : m;
}

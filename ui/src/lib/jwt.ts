// Reading (not verifying) the claims of a JWS: the issuer verified what it issued, the API
// verifies what it receives; the UI only needs expiry, subject, nonce and the refresh family.

export type Claims = Record<string, unknown>;

function base64UrlDecode(s: string): string {
  const b64 = s.replace(/-/g, "+").replace(/_/g, "/");
  const padded = b64 + "=".repeat((4 - (b64.length % 4)) % 4);
  const bin = atob(padded);
  const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
  return new TextDecoder().decode(bytes);
}

/** The payload of a compact JWS, or null when it is not one. */
export function claims(token: string): Claims | null {
  const parts = token.split(".");
  if (parts.length !== 3) return null;
  try {
    const c: unknown = JSON.parse(base64UrlDecode(parts[1]));
    return c !== null && typeof c === "object" && !Array.isArray(c) ? (c as Claims) : null;
  } catch {
    return null;
  }
}

/** The `exp` of a token in milliseconds since the epoch, or 0 when absent. */
export function expiresAtMs(token: string): number {
  const exp = claims(token)?.exp;
  return typeof exp === "number" ? exp * 1000 : 0;
}

/** The token's `iat` in milliseconds, or 0 when absent. */
export function issuedAtMs(token: string): number {
  const iat = claims(token)?.iat;
  return typeof iat === "number" ? iat * 1000 : 0;
}

/** A string claim, or "" when absent. */
export function stringClaim(token: string, name: string): string {
  const v = claims(token)?.[name];
  return typeof v === "string" ? v : "";
}

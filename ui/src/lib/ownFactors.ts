// The account page's "Sign-in methods" (docs/mfa.md, "API, CLI, UI"): what the caller's second
// factors look like as rows, the checks of the forms that change them, the setup key as it is
// shown and the recovery codes' text file. Pure: the pages call the API and render.

import type { Factors } from "../gen/ichor/v1alpha1/user_pb";
import { msg, type Key, type Msg } from "../strings";
import { TYPED_FACTORS, type TypedFactor } from "./factor";
import { claims } from "./jwt";

/** The digits of an authenticator-app code (RFC 6238 as the issuer checks it). */
export const TOTP_DIGITS = 6;

/** One of the caller's second factors, as the list shows it (times in ms since the epoch). */
export type MethodRow =
  | { kind: "totp"; createdAt: number | null }
  | { kind: "recovery"; remaining: number; createdAt: number | null }
  | {
    kind: "passkey";
    id: string;
    name: string;
    createdAt: number | null;
    lastUsedAt: number | null;
    synced: boolean;
    /** A copy of it was detected: it no longer completes a sign-in and should be removed. */
    cloned: boolean;
    /** When the copy was detected; null when not, or when the time is unreadable. */
    clonedAt: number | null;
  };

/** An RFC 3339 time of the API in ms since the epoch; null when empty or unreadable. */
export function parseTime(rfc3339: string): number | null {
  if (!rfc3339) return null;
  const ms = Date.parse(rfc3339);
  return Number.isFinite(ms) ? ms : null;
}

/** The rows of the list: passkeys, then the authenticator app, then the recovery codes. */
export function methodRows(f: Factors | undefined | null): MethodRow[] {
  if (!f) return [];
  const rows: MethodRow[] = f.passkeys.map((p) => ({
    kind: "passkey",
    id: p.id,
    name: p.name,
    createdAt: parseTime(p.createdAt),
    lastUsedAt: parseTime(p.lastUsedAt),
    synced: p.backupEligible,
    cloned: p.clonedAt !== "",
    clonedAt: parseTime(p.clonedAt),
  }));
  if (f.totp) rows.push({ kind: "totp", createdAt: parseTime(f.totp.createdAt) });
  if (f.recovery) rows.push({ kind: "recovery", remaining: f.recovery.remaining, createdAt: parseTime(f.recovery.createdAt) });
  return rows;
}

/** Whether the caller has a factor a sign-in asks for on its own: an authenticator app or a passkey. */
export function hasRealFactor(f: Factors | undefined | null): boolean {
  return !!f && (!!f.totp || f.passkeys.length > 0);
}

/** The typed kinds a code of the caller may be (what the code fields hint at). */
export function typedKinds(f: Factors | undefined | null): ("totp" | "recovery")[] {
  const kinds: ("totp" | "recovery")[] = [];
  if (f?.totp) kinds.push("totp");
  if (f?.recovery && f.recovery.remaining > 0) kinds.push("recovery");
  return kinds;
}

/**
 * Whether `idToken` is of a sign-in that passed a second factor (its `amr` holds `mfa`): the
 * API takes no other token of a user who has an authenticator app or a passkey.
 */
export function signedInWithFactor(idToken: string | null): boolean {
  const amr = idToken ? claims(idToken)?.amr : undefined;
  return Array.isArray(amr) && amr.includes("mfa");
}

/**
 * The kinds of the code a password change asks for, or undefined when it asks for none: the
 * issuer requires one of a caller who has an authenticator app or a passkey. From the caller's
 * factors when they are known; before that (and while the password must be changed, when they
 * cannot be read) from the session: a sign-in that passed a factor, either kind.
 */
export function passwordCodeKinds(f: Factors | undefined | null, withFactor: boolean): TypedFactor[] | undefined {
  if (f) return hasRealFactor(f) ? typedKinds(f) : undefined;
  return withFactor ? [...TYPED_FACTORS] : undefined;
}

/** Which factor a removal names. */
export type Removal = { kind: "totp" } | { kind: "recovery" } | { kind: "passkey"; id: string; name: string };

/**
 * What removing `r` from `f` does, for the confirmation: removing the last authenticator app or
 * passkey takes the recovery codes with it and leaves the password alone.
 */
export function removalEffect(f: Factors | undefined | null, r: Removal): Key {
  if (r.kind === "recovery") return "removeRecoveryText";
  const realLeft = (f?.totp && r.kind !== "totp" ? 1 : 0) +
    (f?.passkeys ?? []).filter((p) => !(r.kind === "passkey" && p.id === r.id)).length;
  return realLeft > 0 ? "removeFactorText" : "removeLastFactorText";
}

/** The setup key as shown: groups of four characters, for typing into an app by hand. */
export function groupSecret(secret: string): string {
  return (secret.replace(/\s+/g, "").match(/.{1,4}/g) ?? []).join(" ");
}

/** A typed authenticator-app code without the spaces and dashes people type in it. */
export function normalizeTotpCode(code: string): string {
  return code.replace(/[\s-]/g, "");
}

/** The check of the first code of a new app: six digits. */
export function checkTotpCode(code: string): Msg | null {
  const c = normalizeTotpCode(code);
  if (c === "") return msg("enterCode");
  return new RegExp(`^\\d{${TOTP_DIGITS}}$`).test(c) ? null : msg("enterSixDigits");
}

/** The checks of a change asking for the password and a current code, by field. */
export function checkChange(password: string, code: string): Record<string, Msg> {
  const e: Record<string, Msg> = {};
  if (password === "") e.password = msg("enterCurrent");
  if (code.trim() === "") e.code = msg("enterCode");
  return e;
}

/** The check of the password that starts an app's setup. */
export function checkPassword(password: string): Record<string, Msg> {
  return password === "" ? { password: msg("enterCurrent") } : {};
}

/**
 * The checks of the form adding a factor, by field: the password, and a current code when the
 * caller has an authenticator app or a passkey already (`codeAsked`), as the issuer requires.
 */
export function checkEnrol(password: string, code: string, codeAsked: boolean): Record<string, Msg> {
  return codeAsked ? checkChange(password, code) : checkPassword(password);
}

/**
 * Whether a refusal was of the typed code (wrong, used, or too many wrong ones): the code was
 * counted or used, so the field is emptied for another one.
 */
export function codeRefused(m: Msg): boolean {
  return m.key === "wrongCode" || m.key === "refusedCodeWait" || m.key === "enterCode";
}

/** The recovery codes as a text file: its name and its content. */
export function recoveryCodesFile(name: string, issuer: string, codes: readonly string[], header: string): {
  filename: string;
  text: string;
} {
  const safe = name.replace(/[^A-Za-z0-9._@-]/g, "_");
  return {
    filename: `ichor-recovery-codes-${safe}.txt`,
    text: `${header}\n${issuer}\n\n${codes.join("\n")}\n`,
  };
}

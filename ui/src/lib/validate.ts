// Checks of form input, before anything is sent (the server checks again).
import { S } from "../strings";

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

function bytes(s: string): number {
  return new TextEncoder().encode(s).length;
}

/** The message for a user name, or "" when valid. */
export function checkName(name: string): string {
  return name.length <= 63 && DNS_LABEL.test(name) ? "" : S.nameInvalid;
}

/** The message for an e-mail (empty is allowed), or "". */
export function checkEmail(email: string): string {
  if (email === "") return "";
  return bytes(email) <= 254 && /^[^\s@]+@[^\s@]+$/.test(email) ? "" : S.emailInvalid;
}

/** The message for a display name, or "". */
export function checkDisplayName(d: string): string {
  return bytes(d) <= 256 ? "" : S.displayNameTooLong;
}

/** The messages of a password change form, by field; empty when valid. */
export function checkPasswordChange(current: string, next: string, repeat: string): Record<string, string> {
  const e: Record<string, string> = {};
  if (current === "") e.current = S.enterCurrent;
  if (bytes(next) < 12) e.next = S.tooShort;
  else if (bytes(next) > 128) e.next = S.tooLong;
  else if (next === current) e.next = S.sameAsOld;
  if (!e.next && repeat !== next) e.repeat = S.mismatch;
  return e;
}

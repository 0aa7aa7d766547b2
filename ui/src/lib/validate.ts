// Checks of form input, before anything is sent (the server checks again).
import { msg, type Msg } from "../strings";

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

function bytes(s: string): number {
  return new TextEncoder().encode(s).length;
}

/** The longest user name (a DNS label). */
export const NAME_MAX = 63;
/** The shortest new password, in bytes. */
export const PASSWORD_MIN = 12;
/** The longest new password, in bytes. */
export const PASSWORD_MAX = 128;
/** The longest display name, in bytes. */
export const DISPLAY_NAME_MAX = 256;

/** The message for a user name, or null when valid. */
export function checkName(name: string): Msg | null {
  return name.length <= NAME_MAX && DNS_LABEL.test(name) ? null : msg("nameInvalid", { max: NAME_MAX });
}

/** The message for an e-mail (empty is allowed), or null. */
export function checkEmail(email: string): Msg | null {
  if (email === "") return null;
  return bytes(email) <= 254 && /^[^\s@]+@[^\s@]+$/.test(email) ? null : msg("emailInvalid");
}

/** The message for a display name, or null. */
export function checkDisplayName(d: string): Msg | null {
  return bytes(d) <= DISPLAY_NAME_MAX ? null : msg("displayNameTooLong", { max: DISPLAY_NAME_MAX });
}

/** The messages of a password change form, by field; empty when valid. */
export function checkPasswordChange(current: string, next: string, repeat: string): Record<string, Msg> {
  const e: Record<string, Msg> = {};
  if (current === "") e.current = msg("enterCurrent");
  if (bytes(next) < PASSWORD_MIN) e.next = msg("tooShort", { min: PASSWORD_MIN });
  else if (bytes(next) > PASSWORD_MAX) e.next = msg("tooLong", { max: PASSWORD_MAX });
  else if (next === current) e.next = msg("sameAsOld");
  if (!e.next && repeat !== next) e.repeat = msg("mismatch");
  return e;
}

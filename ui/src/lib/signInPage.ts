// The issuer's sign-in page for the redirect flow (`/oidc/login?ticket=`, the page `ichor auth
// login` opens): the issuer serves login.html with a JSON data block that says which ticket the
// form posts, whom the sign-in is for (from the checked authorization request), the user name
// typed before and the refusal of the last attempt as a key of the catalogs. The page renders the
// SPA's sign-in card from it; the form is posted to /oidc/login as the issuer has always taken it.
// After a right password, a user with a second factor gets the same page with the second step's
// data instead (`factor_ticket`, the kinds offered, a passkey's options), whose forms are posted to
// /oidc/login/factor (a code, or a passkey's answer as the field `credential`).

import { msg, type Key, type Msg } from "../strings";
import { passkeyOptionsOf, typedFactors, type TypedFactor } from "./factor";

/** The id of the `<script type="application/json">` block the issuer writes into the page. */
export const SIGN_IN_DATA_ID = "ichor-sign-in";

/** The CLI's client id: its sign-in names the loopback port it answers on. */
export const CLI_CLIENT = "ichor-cli";

/** Whom a sign-in is for, as the issuer tells both steps' pages. */
export interface SignInFor {
  /** The client id of the authorization request. */
  client: string;
  /** The port of the CLI's loopback redirect URI; null for other clients. */
  port: number | null;
  /** The origin of the redirect URI. */
  origin: string;
}

/** What the issuer tells the sign-in page. */
export interface SignInPage extends SignInFor {
  /** The signed login ticket the form posts back. */
  ticket: string;
  /** The user name typed before (after a refused attempt), else empty. */
  username: string;
  /** The refusal of the last attempt, else null. */
  error: Msg | null;
}

/** What the issuer tells the second step's page. */
export interface FactorPage extends SignInFor {
  /** The signed second-factor ticket the form posts back. */
  factorTicket: string;
  /** The typed factor kinds offered (at least one of these or a passkey). */
  factors: TypedFactor[];
  /** The options for `navigator.credentials.get` when a passkey is offered, else null. */
  passkeyOptions: unknown | null;
  /** The refusal of the last attempt, else null. */
  error: Msg | null;
}

/** The refusals the issuer may send back to the page, as keys of the catalogs. */
const ERROR_KEYS: readonly Key[] = ["wrongCredentials", "tooManyAttempts", "signInBusy", "signInUnavailable"];
/** The refusals the issuer may send back to the second step's page. */
const FACTOR_ERROR_KEYS: readonly Key[] = ["wrongCode", "tooManyAttempts", "signInUnavailable"];

const isString = (v: unknown): v is string => typeof v === "string";

/**
 * The page data from the JSON block's text, or null when it is missing or not of this shape (the
 * page then says the request is invalid). An unknown error key or value is dropped, not shown.
 */
export function parseSignInPage(text: string | null | undefined): SignInPage | null {
  const r = parseBlock(text);
  const about = r && signInFor(r);
  if (!r || !about || !isString(r.ticket) || r.ticket === "") return null;
  return {
    ...about,
    ticket: r.ticket,
    username: isString(r.username) ? r.username : "",
    error: parseError(r.error, ERROR_KEYS),
  };
}

/**
 * The second step's page data from the JSON block's text, or null when it is not the second
 * step's (no `factor_ticket`), offers no kind this page takes (a typed code or a passkey with
 * its options), or is not of this shape.
 */
export function parseFactorPage(text: string | null | undefined): FactorPage | null {
  const r = parseBlock(text);
  const about = r && signInFor(r);
  if (!r || !about || !isString(r.factor_ticket) || r.factor_ticket === "") return null;
  const factors = typedFactors(r.factors);
  const passkeyOptions = passkeyOptionsOf(r.factors, r.passkey_options);
  if (factors.length === 0 && passkeyOptions === null) return null;
  return {
    ...about, factorTicket: r.factor_ticket, factors, passkeyOptions, error: parseError(r.error, FACTOR_ERROR_KEYS),
  };
}

function parseBlock(text: string | null | undefined): Record<string, unknown> | null {
  let raw: unknown;
  try {
    raw = JSON.parse(text ?? "");
  } catch {
    return null;
  }
  return typeof raw === "object" && raw !== null && !Array.isArray(raw) ? (raw as Record<string, unknown>) : null;
}

function signInFor(r: Record<string, unknown>): SignInFor | null {
  if (!isString(r.client) || !isString(r.origin)) return null;
  const port = Number.isInteger(r.port) && (r.port as number) > 0 && (r.port as number) < 65536 ? (r.port as number) : null;
  return { client: r.client, port, origin: r.origin };
}

function parseError(raw: unknown, keys: readonly Key[]): Msg | null {
  if (typeof raw !== "object" || raw === null) return null;
  const e = raw as { key?: unknown; values?: unknown };
  if (!isString(e.key) || !(keys as readonly string[]).includes(e.key)) return null;
  const seconds = (e.values as { seconds?: unknown } | undefined)?.seconds;
  return Number.isInteger(seconds) && (seconds as number) >= 0
    ? msg(e.key as Key, { seconds: seconds as number })
    : msg(e.key as Key);
}

/** The sentence saying whom the sign-in is for: the CLI and its port, or the web app's origin. */
export function purposeOf(page: SignInFor): Msg {
  if (page.client === CLI_CLIENT) {
    // A string, not a number: a port is not written with grouping separators.
    return msg("signInForCli", { client: page.client, port: page.port === null ? "?" : String(page.port) });
  }
  return msg("signInForWeb", { client: page.client, origin: page.origin });
}

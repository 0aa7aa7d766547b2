// The browser session's decisions (seed amendment 2026-11-04, browser session), as pure functions
// of the token times and `now`, so that each rule is tested without a browser or a clock:
// when to refresh, what a refresh's answer means, when a tab coming back into view refreshes.

/** How long before expiry a token of three minutes or more is refreshed. */
export const REFRESH_AHEAD_MS = 60_000;
/** Never refresh more often than this, whatever the token's lifetime. */
export const MIN_REFRESH_INTERVAL_MS = 10_000;
/** How long a tab waits before retrying a refresh that failed on the network or with a 5xx. */
export const RETRY_MS = 15_000;

/** A token's times, in milliseconds since the epoch (0 when the claim is absent). */
export interface TokenTimes {
  issuedAt: number;
  expiresAt: number;
}

/**
 * How long before expiry a token is refreshed: a minute, or a third of its lifetime for tokens
 * that live less than three minutes (a one-minute token would otherwise be due at once).
 */
export function aheadMs(t: TokenTimes): number {
  const lifetime = t.expiresAt - t.issuedAt;
  return lifetime > 0 && lifetime < 3 * REFRESH_AHEAD_MS ? Math.floor(lifetime / 3) : REFRESH_AHEAD_MS;
}

/**
 * How long from `now` the next refresh waits after a token was stored: until [`aheadMs`] before
 * its end, never less than [`MIN_REFRESH_INTERVAL_MS`].
 */
export function nextRefreshInMs(t: TokenTimes, now: number): number {
  return Math.max(MIN_REFRESH_INTERVAL_MS, t.expiresAt - aheadMs(t) - now);
}

/** Whether a token is near its end (inside its refresh-ahead window, or past it). */
export function nearEnd(t: TokenTimes, now: number): boolean {
  return t.expiresAt - now <= aheadMs(t);
}

/**
 * Whether a tab that becomes visible refreshes at once: its token is near its end. A hidden tab's
 * timers are throttled or frozen by the browser, so the scheduled refresh may not have run.
 */
export function refreshOnVisible(t: TokenTimes, now: number): boolean {
  return nearEnd(t, now);
}

/** Whether a request must wait for a refresh first: the token has less than half its window left. */
export function refreshBeforeUse(t: TokenTimes, now: number): boolean {
  return t.expiresAt - now <= aheadMs(t) / 2;
}

/** What a refresh's answer means for the session. */
export type RefreshOutcome =
  /** Store the new tokens. */
  | "store"
  /** The issuer refused the refresh token (400, 401, 403): the session is over. */
  | "end"
  /** The issuer could not answer (network, 5xx, 429): keep the session, retry in [`RETRY_MS`]. */
  | "retry";

/** The outcome of a refresh by its HTTP status, or `"network"` when no answer came. */
export function refreshOutcome(status: number | "network"): RefreshOutcome {
  if (status === "network") return "retry";
  if (status >= 200 && status < 300) return "store";
  if (status === 400 || status === 401 || status === 403) return "end";
  return "retry";
}

// The browser session (seed amendments 2026-11-04): the ID token and the refresh token live in
// sessionStorage only (tab-scoped, gone when the tab closes). The ID token is refreshed a minute
// before it expires (the decisions are in ./policy), when a hidden tab whose token is near its end
// becomes visible, and once after a 401, single-flight: concurrent callers share one refresh, so
// one rotation happens. A refused refresh (400, 401, 403) ends the session; a network failure or a
// 5xx keeps it and retries every 15 s. A tab holding a family keeps the Web Lock `ichor-session-<fam>`; a
// duplicated tab (which copied sessionStorage) cannot take it and drops the copied tokens, so it
// never presents a retired token that would revoke the original's family. Every refresh, whatever
// starts it (a timer, the tab becoming visible, a call), waits for that lock first.

import { claims, expiresAtMs, issuedAtMs } from "./jwt";
import {
  RETRY_MS, aheadMs, nextRefreshInMs, refreshBeforeUse, refreshOnVisible, refreshOutcome, type TokenTimes,
} from "./policy";

export const TOKEN_KEY = "ichor.token";
export const REFRESH_KEY = "ichor.refresh";

/** The `iat` and `exp` of a token. */
export function times(token: string): TokenTimes {
  return { issuedAt: issuedAtMs(token), expiresAt: expiresAtMs(token) };
}

/** How long before expiry a token is refreshed ([`aheadMs`] of its times). */
export function refreshAheadMs(token: string): number {
  return aheadMs(times(token));
}
/** How long a tab waits for its family's lock before it treats itself as a copy. */
export const LOCK_WAIT_MS = 1_500;
/** The sign-out revocation's time limit. */
export const REVOKE_TIMEOUT_MS = 3_000;

/** What is stored beside the refresh token (`ichor.refresh`). */
export interface StoredRefresh {
  refreshToken: string;
  tokenEndpoint: string;
  revocationEndpoint?: string;
  clientId: string;
}

export interface Deps {
  storage: Storage;
  fetch: typeof fetch;
  now: () => number;
  setTimeout: (f: () => void, ms: number) => unknown;
  clearTimeout: (t: unknown) => void;
  locks?: LockManager;
}

/** Why the session ended (shown on the sign-in card). */
export type EndReason = "signedOut" | "expired" | "copiedTab";

export class Session {
  private inflight: Promise<string | null> | null = null;
  private timer: unknown = null;
  private releaseLock: (() => void) | null = null;
  private lockedFamily: string | null = null;
  private claiming: { fam: string; held: Promise<boolean> } | null = null;
  onEnd: (reason: EndReason) => void = () => {};

  constructor(private readonly d: Deps) {}

  /** The stored ID token, or null. */
  idToken(): string | null {
    return this.d.storage.getItem(TOKEN_KEY);
  }

  /** The stored refresh data, or null. */
  refresh(): StoredRefresh | null {
    const raw = this.d.storage.getItem(REFRESH_KEY);
    if (!raw) return null;
    try {
      const r = JSON.parse(raw) as StoredRefresh;
      return typeof r.refreshToken === "string" && typeof r.tokenEndpoint === "string" ? r : null;
    } catch {
      return null;
    }
  }

  /** The refresh family of the stored refresh token (its `fam` claim), or null. */
  family(): string | null {
    const r = this.refresh();
    const fam = r ? claims(r.refreshToken)?.fam : undefined;
    return typeof fam === "string" && fam !== "" ? fam : null;
  }

  /** Stores a new sign-in's or refresh's tokens and schedules the next refresh. */
  store(idToken: string, refresh: StoredRefresh | null): void {
    this.d.storage.setItem(TOKEN_KEY, idToken);
    if (refresh) this.d.storage.setItem(REFRESH_KEY, JSON.stringify(refresh));
    this.schedule();
  }

  /** Drops the tokens (no revocation) and the lock. */
  clear(): void {
    this.d.storage.removeItem(TOKEN_KEY);
    this.d.storage.removeItem(REFRESH_KEY);
    this.cancelTimer();
    this.releaseLock?.();
    this.releaseLock = null;
    this.lockedFamily = null;
  }

  /**
   * Takes the Web Lock of the stored family. False when another tab holds it (this tab is a
   * copy): the copied tokens are then dropped. True without a family, without Web Locks, or when
   * the lock call fails for another reason (the tab goes ahead). Concurrent callers share one
   * request for the lock.
   */
  claimFamily(): Promise<boolean> {
    const fam = this.family();
    if (!fam || !this.d.locks || this.lockedFamily === fam) return Promise.resolve(true);
    if (this.claiming?.fam === fam) return this.claiming.held;
    const held = this.requestFamilyLock(fam, this.d.locks).finally(() => (this.claiming = null));
    this.claiming = { fam, held };
    return held;
  }

  private async requestFamilyLock(fam: string, locks: LockManager): Promise<boolean> {
    let granted!: (held: boolean) => void;
    const result = new Promise<boolean>((r) => (granted = r));
    const controller = new AbortController();
    const t = this.d.setTimeout(() => controller.abort(), LOCK_WAIT_MS);
    locks
      .request(`ichor-session-${fam}`, { signal: controller.signal }, () => {
        this.d.clearTimeout(t);
        granted(true);
        return new Promise<void>((release) => (this.releaseLock = release));
      })
      .catch((e: unknown) => {
        this.d.clearTimeout(t);
        granted(!(e instanceof DOMException && e.name === "AbortError"));
      });
    const held = await result;
    if (held) {
      this.lockedFamily = fam;
    } else {
      this.clear();
      this.onEnd("copiedTab");
    }
    return held;
  }

  /** The session's start and absolute end (the refresh family's `iat` and `exp`), or null. */
  times(): { since: number; until: number } | null {
    const r = this.refresh();
    if (!r) return null;
    const t = times(r.refreshToken);
    return t.issuedAt && t.expiresAt ? { since: t.issuedAt, until: t.expiresAt } : null;
  }

  /**
   * Schedules the refresh a minute (a third of the lifetime for short tokens) before the ID token
   * expires, never sooner than ten seconds from now ([`nextRefreshInMs`]).
   */
  schedule(): void {
    const token = this.idToken();
    if (!token || !this.refresh()) return this.cancelTimer();
    this.setTimer(nextRefreshInMs(times(token), this.d.now()));
  }

  /** The delay of the pending refresh timer in milliseconds, or null (for tests and diagnostics). */
  pendingMs(): number | null {
    return this.timerMs;
  }

  private timerMs: number | null = null;

  private setTimer(ms: number): void {
    this.cancelTimer();
    this.timerMs = ms;
    this.timer = this.d.setTimeout(() => {
      this.timer = null;
      this.timerMs = null;
      void this.refreshNow();
    }, ms);
  }

  private cancelTimer(): void {
    if (this.timer !== null) this.d.clearTimeout(this.timer);
    this.timer = null;
    this.timerMs = null;
  }

  /**
   * The tab became visible: refreshes at once when the ID token is near its end (the timers of a
   * hidden tab are throttled or frozen, so the scheduled refresh may not have run). Resolves to
   * whether a refresh was started.
   */
  async becameVisible(): Promise<boolean> {
    const token = this.idToken();
    if (!token || !this.refresh() || !refreshOnVisible(times(token), this.d.now())) return false;
    await this.refreshNow();
    return true;
  }

  /** An ID token that is not about to expire (refreshing first when needed), or null. */
  async validToken(): Promise<string | null> {
    const token = this.idToken();
    if (!token) return null;
    if (!refreshBeforeUse(times(token), this.d.now())) return token;
    return (await this.refreshNow()) ?? (expiresAtMs(token) > this.d.now() ? token : null);
  }

  /**
   * Refreshes the ID token with the stored refresh token; concurrent calls share one request.
   * A refused refresh (400, 401, 403: a revoked, reused or expired family, a disabled user) ends
   * the session; a network failure or a 5xx keeps it and retries in 15 s ([`refreshOutcome`]).
   */
  refreshNow(): Promise<string | null> {
    if (!this.inflight) {
      this.inflight = this.doRefresh().finally(() => (this.inflight = null));
    }
    return this.inflight;
  }

  private async doRefresh(): Promise<string | null> {
    // A copied tab must not present the copied refresh token: the family's lock comes first.
    if (!(await this.claimFamily())) return null;
    const r = this.refresh();
    if (!r) return null;
    let response: Response;
    try {
      response = await this.d.fetch(r.tokenEndpoint, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
        body: new URLSearchParams({
          grant_type: "refresh_token",
          refresh_token: r.refreshToken,
          client_id: r.clientId,
        }).toString(),
      });
    } catch {
      return this.retryLater();
    }
    switch (refreshOutcome(response.status)) {
      case "end":
        this.clear();
        this.onEnd("expired");
        return null;
      case "retry":
        return this.retryLater();
      case "store":
        break;
    }
    let body: { id_token?: string; refresh_token?: string };
    try {
      body = (await response.json()) as typeof body;
    } catch {
      return this.retryLater();
    }
    if (!body.id_token) return this.retryLater();
    this.store(body.id_token, body.refresh_token ? { ...r, refreshToken: body.refresh_token } : null);
    return body.id_token;
  }

  /** Keeps the session after a failed refresh and tries again in [`RETRY_MS`]. */
  private retryLater(): null {
    if (this.refresh()) this.setTimer(RETRY_MS);
    return null;
  }

  /**
   * Signs out: posts the refresh token to the revocation endpoint (best effort, `keepalive`,
   * 3 s limit), then clears the tokens whatever the answer.
   */
  async signOut(): Promise<void> {
    const r = this.refresh();
    if (r?.revocationEndpoint) {
      const controller = new AbortController();
      const t = this.d.setTimeout(() => controller.abort(), REVOKE_TIMEOUT_MS);
      try {
        await this.d.fetch(r.revocationEndpoint, {
          method: "POST",
          keepalive: true,
          signal: controller.signal,
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({
            token: r.refreshToken,
            client_id: r.clientId,
            token_type_hint: "refresh_token",
          }).toString(),
        });
      } catch {
        // Best effort: the token then lasts to its lifetime.
      } finally {
        this.d.clearTimeout(t);
      }
    }
    this.clear();
    this.onEnd("signedOut");
  }
}

/** The session of this tab. */
export const session = new Session({
  storage: typeof sessionStorage === "undefined" ? (undefined as unknown as Storage) : sessionStorage,
  fetch: (...a) => fetch(...a),
  now: () => Date.now(),
  setTimeout: (f, ms) => setTimeout(f, ms),
  clearTimeout: (t) => clearTimeout(t as ReturnType<typeof setTimeout>),
  locks: typeof navigator !== "undefined" ? navigator.locks : undefined,
});

import { describe, expect, it, vi } from "vitest";
import { REFRESH_KEY, Session, TOKEN_KEY, refreshAheadMs, type Deps } from "./session";
import { MemoryStorage, unsignedJwt } from "./testing";

const jws = (claims: object) => unsignedJwt(claims);

const NOW = 1_800_000_000_000;

function deps(fetchImpl: Deps["fetch"], locks?: LockManager): Deps {
  return {
    storage: new MemoryStorage(),
    fetch: fetchImpl,
    now: () => NOW,
    setTimeout: (f, ms) => setTimeout(f, ms),
    clearTimeout: (t) => clearTimeout(t as ReturnType<typeof setTimeout>),
    locks,
  };
}

function signedIn(d: Deps, expSecondsFromNow: number): Session {
  const s = new Session(d);
  d.storage.setItem(TOKEN_KEY, jws({ sub: "ada", exp: NOW / 1000 + expSecondsFromNow }));
  d.storage.setItem(
    REFRESH_KEY,
    JSON.stringify({
      refreshToken: jws({ fam: "f1", gen: 1 }),
      tokenEndpoint: "https://i/oidc/token",
      revocationEndpoint: "https://i/oidc/revoke",
      clientId: "ichor-ui",
    }),
  );
  return s;
}

describe("the browser session", () => {
  it("shares one refresh among concurrent callers and stores the rotated token", async () => {
    const fresh = jws({ sub: "ada", exp: NOW / 1000 + 300 });
    const rotated = jws({ fam: "f1", gen: 2 });
    const f = vi.fn(async () => new Response(JSON.stringify({ id_token: fresh, refresh_token: rotated })));
    const d = deps(f as unknown as Deps["fetch"]);
    const s = signedIn(d, 10);
    const got = await Promise.all([s.validToken(), s.validToken(), s.refreshNow()]);
    expect(got).toEqual([fresh, fresh, fresh]);
    expect(f).toHaveBeenCalledTimes(1);
    expect(s.idToken()).toBe(fresh);
    expect(s.refresh()?.refreshToken).toBe(rotated);
    s.clear();
  });

  it("does not refresh a token far from expiry", async () => {
    const f = vi.fn();
    const d = deps(f as unknown as Deps["fetch"]);
    const s = signedIn(d, 300);
    expect(await s.validToken()).toBe(d.storage.getItem(TOKEN_KEY));
    expect(f).not.toHaveBeenCalled();
  });

  it("ends the session when the issuer refuses the refresh", async () => {
    const d = deps((async () => new Response('{"error":"invalid_grant"}', { status: 400 })) as Deps["fetch"]);
    const s = signedIn(d, 10);
    const ended: string[] = [];
    s.onEnd = (r) => ended.push(r);
    expect(await s.refreshNow()).toBeNull();
    expect(s.idToken()).toBeNull();
    expect(s.refresh()).toBeNull();
    expect(ended).toEqual(["expired"]);
  });

  it("ends the session when the issuer answers 401 or 403", async () => {
    for (const status of [401, 403]) {
      const d = deps((async () => new Response('{"error":"access_denied"}', { status })) as Deps["fetch"]);
      const s = signedIn(d, 10);
      const ended: string[] = [];
      s.onEnd = (r) => ended.push(r);
      expect(await s.refreshNow()).toBeNull();
      expect(s.refresh(), String(status)).toBeNull();
      expect(ended).toEqual(["expired"]);
    }
  });

  it("keeps the session when the network fails and retries in 15 s", async () => {
    const d = deps((async () => { throw new TypeError("offline"); }) as Deps["fetch"]);
    const s = signedIn(d, 10);
    expect(await s.refreshNow()).toBeNull();
    expect(s.idToken()).not.toBeNull();
    expect(s.pendingMs()).toBe(15_000);
    s.clear();
  });

  it("keeps the session on a 5xx and retries in 15 s, then stores the answer once the issuer is back", async () => {
    const fresh = jws({ sub: "ada", iat: NOW / 1000, exp: NOW / 1000 + 300 });
    let status = 503;
    const f = vi.fn(async () => status === 200
      ? new Response(JSON.stringify({ id_token: fresh, refresh_token: jws({ fam: "f1", gen: 2 }) }))
      : new Response("{}", { status }));
    const d = deps(f as unknown as Deps["fetch"]);
    const s = signedIn(d, 10);
    for (const code of [503, 500, 502]) {
      status = code;
      expect(await s.refreshNow()).toBeNull();
      expect(s.refresh(), String(code)).not.toBeNull();
      expect(s.pendingMs()).toBe(15_000);
    }
    status = 200;
    expect(await s.refreshNow()).toBe(fresh);
    // Rescheduled from the new token: a minute before its end.
    expect(s.pendingMs()).toBe(240_000);
    s.clear();
  });

  it("reschedules after every refresh from the new token's life", async () => {
    const short = jws({ sub: "ada", iat: NOW / 1000, exp: NOW / 1000 + 60 });
    const f = vi.fn(async () => new Response(JSON.stringify({ id_token: short })));
    const d = deps(f as unknown as Deps["fetch"]);
    const s = signedIn(d, 10);
    s.schedule();
    expect(s.pendingMs()).toBe(10_000);
    await s.refreshNow();
    expect(s.pendingMs()).toBe(40_000);
    s.clear();
  });

  it("refreshes at once when a tab becomes visible with its token near its end, not otherwise", async () => {
    const fresh = jws({ sub: "ada", iat: NOW / 1000, exp: NOW / 1000 + 300 });
    const f = vi.fn(async () => new Response(JSON.stringify({ id_token: fresh })));
    const far = signedIn(deps(f as unknown as Deps["fetch"]), 250);
    expect(await far.becameVisible()).toBe(false);
    expect(f).not.toHaveBeenCalled();
    const past = signedIn(deps(f as unknown as Deps["fetch"]), -120);
    expect(await past.becameVisible()).toBe(true);
    expect(f).toHaveBeenCalledTimes(1);
    expect(past.idToken()).toBe(fresh);
    far.clear();
    past.clear();
  });

  it("revokes the refresh token before it clears the tokens on sign-out", async () => {
    const seen: string[] = [];
    const d = deps((async (url: string, init: RequestInit) => {
      seen.push(`${url} ${init.body}`);
      return new Response(null, { status: 200 });
    }) as unknown as Deps["fetch"]);
    const s = signedIn(d, 300);
    const token = s.refresh()?.refreshToken ?? "";
    await s.signOut();
    expect(seen).toHaveLength(1);
    expect(seen[0]).toContain("https://i/oidc/revoke");
    expect(seen[0]).toContain(`token=${token}`);
    expect(seen[0]).toContain("client_id=ichor-ui");
    expect(s.idToken()).toBeNull();
  });

  it("drops copied tokens when another tab holds the family's lock", async () => {
    const locks = {
      request: (_name: string, opts: { signal: AbortSignal }) =>
        new Promise((_, reject) => opts.signal.addEventListener("abort", () =>
          reject(new DOMException("aborted", "AbortError")))),
    } as unknown as LockManager;
    const f = vi.fn();
    const d = deps(f as unknown as Deps["fetch"], locks);
    const s = signedIn(d, 300);
    const ended: string[] = [];
    s.onEnd = (r) => ended.push(r);
    expect(await s.claimFamily()).toBe(false);
    expect(s.idToken()).toBeNull();
    expect(ended).toEqual(["copiedTab"]);
    expect(f).not.toHaveBeenCalled();
  });

  it("never presents copied tokens before its lock is decided, whatever starts the refresh", async () => {
    const locks = {
      request: (_name: string, opts: { signal: AbortSignal }) =>
        new Promise((_, reject) => opts.signal.addEventListener("abort", () =>
          reject(new DOMException("aborted", "AbortError")))),
    } as unknown as LockManager;
    const f = vi.fn();
    const d = deps(f as unknown as Deps["fetch"], locks);
    // A copy whose ID token is near its end: becoming visible (or a timer, or a call) refreshes.
    const s = signedIn(d, 10);
    const ended: string[] = [];
    s.onEnd = (r) => ended.push(r);
    const visible = s.becameVisible();
    const claimed = s.claimFamily();
    await visible;
    expect(await claimed).toBe(false);
    expect(f).not.toHaveBeenCalled();
    expect(s.idToken()).toBeNull();
    expect(ended).toEqual(["copiedTab"]);
  });

  it("asks for the family's lock once when several callers claim it at the same time", async () => {
    const names: string[] = [];
    const locks = {
      request: (name: string, _o: unknown, cb: () => Promise<void>) => { names.push(name); return cb(); },
    } as unknown as LockManager;
    const d = deps(vi.fn() as unknown as Deps["fetch"], locks);
    const s = signedIn(d, 300);
    expect(await Promise.all([s.claimFamily(), s.claimFamily()])).toEqual([true, true]);
    expect(names).toEqual(["ichor-session-f1"]);
    s.clear();
  });

  it("goes ahead when the family's lock is granted and names the lock after the family", async () => {
    const names: string[] = [];
    const locks = {
      request: (name: string, _o: unknown, cb: () => Promise<void>) => { names.push(name); return cb(); },
    } as unknown as LockManager;
    const d = deps(vi.fn() as unknown as Deps["fetch"], locks);
    const s = signedIn(d, 300);
    expect(await s.claimFamily()).toBe(true);
    expect(names).toEqual(["ichor-session-f1"]);
    expect(s.idToken()).not.toBeNull();
    s.clear();
  });
});

describe("refreshAheadMs", () => {
  it("refreshes a one-minute token a third of its life ahead, not at once", () => {
    expect(refreshAheadMs(jws({ iat: 1000, exp: 1060 }))).toBe(20_000);
  });
  it("refreshes a five-minute token a minute ahead", () => {
    expect(refreshAheadMs(jws({ iat: 1000, exp: 1300 }))).toBe(60_000);
  });
});

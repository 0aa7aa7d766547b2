// The browser session's rules against a real issuer with 1-minute ID tokens (`ichor dev
// --token-ttl 1m`): a real expiry, the issuer stopped and started while a tab is open, a tab
// hidden past its token's life, and a refused refresh. The page's clock is Playwright's
// (page.clock) where the test must move time faster than it passes; the issuer's is real.

import assert from "node:assert/strict";
import { changePassword, jwtExp, launch, signIn, startDev, test, watchCsp } from "./harness.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const storedToken = (p) => p.evaluate(() => sessionStorage.getItem("ichor.token"));

/** Polls `f` (from Node, not the page, whose timers may be paused) until it is truthy. */
async function until(what, f, timeoutMs = 15_000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

/** Counts the page's token-endpoint requests: answered (by status) and failed on the network. */
function watchTokenRequests(p) {
  const seen = { statuses: {}, failed: 0, total: 0 };
  const isToken = (r) => r.method() === "POST" && new URL(r.url()).pathname === "/oidc/token";
  p.on("response", (r) => {
    if (!isToken(r.request())) return;
    seen.total++;
    seen.statuses[r.status()] = (seen.statuses[r.status()] ?? 0) + 1;
  });
  p.on("requestfailed", (r) => {
    if (!isToken(r)) return;
    seen.total++;
    seen.failed++;
  });
  return seen;
}

/** Opens a browser with the page clock installed and signs in as the admin. */
async function signedInTab(dev, password) {
  const b = await launch(dev.ca);
  watchCsp(b.context);
  await b.context.clock.install();
  const seen = watchTokenRequests(b.page);
  await b.page.goto(dev.base);
  await signIn(b.page, "admin", password);
  await b.page.getByRole("heading", { name: "Account" }).waitFor({ timeout: 20_000 });
  return { ...b, seen };
}

async function setVisibility(p, state) {
  await p.evaluate((s) => {
    Object.defineProperty(document, "visibilityState", { configurable: true, get: () => s });
    Object.defineProperty(document, "hidden", { configurable: true, get: () => s === "hidden" });
    document.dispatchEvent(new Event("visibilitychange"));
  }, state);
}

/** The session tests; `adminPassword` is what the first admin's password is changed to. */
export async function sessionRules({ adminPassword }) {
  let dev = null;
  const open = [];
  try {
    dev = await startDev(["--token-ttl", "1m"]);

    await test("a session survives a real ID-token expiry (ichor dev --token-ttl 1m)", async () => {
      const b = await launch(dev.ca);
      open.push(b);
      watchCsp(b.context);
      const p = b.page;
      const seen = watchTokenRequests(p);
      await p.goto(dev.base);
      await signIn(p, "admin", dev.password);
      await p.getByRole("heading", { name: "Choose a new password" }).waitFor();
      await changePassword(p, dev.password, adminPassword);
      await p.getByRole("heading", { name: "Account" }).waitFor({ timeout: 20_000 });
      const first = await storedToken(p);
      const firstExp = jwtExp(first);
      const lifetime = firstExp - JSON.parse(atob(first.split(".")[1].replace(/-/g, "+").replace(/_/g, "/"))).iat;
      assert.equal(lifetime, 60, "the issuer signs 1-minute ID tokens");
      const counted = seen.total;
      const signedInAt = Date.now();
      // A 1-minute token is due for refresh about 40 s after it is issued, not at once.
      await p.waitForTimeout(5_000);
      assert.ok(seen.total - counted <= 1, `no refresh loop: ${seen.total - counted} token requests in the 5 s after sign-in`);
      // The page refreshes by itself, without a call or a reload.
      await p.waitForFunction((t) => { const n = sessionStorage.getItem("ichor.token"); return n && n !== t; },
        first, { timeout: 70_000, polling: 500 });
      // Past the first token's expiry, an API call (ListUsers on the Users page) still succeeds.
      const wait = firstExp * 1000 + 2_000 - Date.now();
      if (wait > 0) await p.waitForTimeout(wait);
      await p.getByRole("link", { name: "Users" }).click();
      await p.getByRole("heading", { name: "Users" }).waitFor();
      await p.locator('tr[data-user="admin"]').waitFor({ timeout: 10_000 });
      assert.ok(jwtExp(await storedToken(p)) * 1000 > Date.now(), "the token in use has not expired");
      assert.equal(await p.getByRole("heading", { name: "Sign in to Ichor" }).count(), 0, "still signed in");
      assert.deepEqual(Object.keys(seen.statuses), ["200"], `every token request succeeded: ${JSON.stringify(seen.statuses)}`);
      console.log(`      token-endpoint requests in the ${Math.round((Date.now() - signedInAt) / 1000)} s after sign-in: ` +
        `${seen.total - counted} (all since the page opened, by status: ${JSON.stringify(seen.statuses)})`);
      await b.close();
    });

    await test("the issuer stopped and started while a tab is open: the session is kept, retried every 15 s and refreshed after the restart", async () => {
      const b = await signedInTab(dev, adminPassword);
      open.push(b);
      const p = b.page;
      const first = await storedToken(p);
      await dev.stop();
      // The scheduled refresh (40 s after issue for a 1-minute token) meets a stopped issuer.
      await p.clock.fastForward(41_000);
      await until("the refresh to fail on the network", () => b.seen.failed >= 1);
      const stored = await p.evaluate(() => [sessionStorage.getItem("ichor.token"), sessionStorage.getItem("ichor.refresh")]);
      assert.equal(stored[0], first, "the ID token is kept");
      assert.ok(stored[1], "the refresh token is kept");
      assert.equal(await p.getByRole("heading", { name: "Sign in to Ichor" }).count(), 0, "the tab stays signed in");
      // No retry before 15 s, one at 15 s.
      await p.clock.fastForward(13_000);
      await sleep(500);
      assert.equal(b.seen.failed, 1, "no retry before 15 s");
      await p.clock.fastForward(2_500);
      await until("the retry 15 s later", () => b.seen.failed >= 2);
      await dev.start();
      await p.clock.fastForward(15_500);
      await until("a refreshed ID token after the restart", async () => (await storedToken(p)) !== first);
      assert.ok(b.seen.statuses[200] >= 1, `a successful refresh: ${JSON.stringify(b.seen)}`);
      assert.equal(b.seen.failed, 2, "two failed attempts while the issuer was down");
      // The session works against the restarted issuer.
      await p.getByRole("link", { name: "Users" }).click();
      await p.locator('tr[data-user="admin"]').waitFor({ timeout: 10_000 });
      assert.equal(await p.getByRole("heading", { name: "Sign in to Ichor" }).count(), 0, "still signed in");
      await b.close();
    });

    await test("a tab hidden past its token's life refreshes as soon as it is visible again", async () => {
      const b = await signedInTab(dev, adminPassword);
      open.push(b);
      const p = b.page;
      const first = await storedToken(p);
      // A hidden tab's timers are throttled or frozen: pause the page clock, hide the tab and
      // move its time past the token's end without running a timer.
      await p.clock.pauseAt(Date.now() + 1_000);
      await setVisibility(p, "hidden");
      const before = b.seen.total;
      await p.clock.setSystemTime(jwtExp(first) * 1000 + 30_000);
      await sleep(1_000);
      assert.equal(b.seen.total, before, "nothing refreshed while hidden");
      assert.equal(await storedToken(p), first);
      await setVisibility(p, "visible");
      await until("a refresh on becoming visible", async () => (await storedToken(p)) !== first, 5_000);
      assert.equal(b.seen.total, before + 1, "exactly one refresh, at once (the page clock is paused)");
      assert.equal(b.seen.statuses[200] >= 1, true);
      assert.equal(await p.getByRole("heading", { name: "Sign in to Ichor" }).count(), 0, "still signed in");
      // Visible again with a fresh token (the page clock back to the issuer's time): a second
      // visibility change does not refresh.
      await p.clock.setSystemTime(Date.now());
      await setVisibility(p, "hidden");
      await setVisibility(p, "visible");
      await sleep(500);
      assert.equal(b.seen.total, before + 1, "no refresh for a token far from its end");
    });

    await test("a refresh the issuer refuses ends the session and shows why", async () => {
      const b = open.at(-1);
      const p = b.page;
      // Revoke the tab's family behind its back, then let the scheduled refresh run.
      const status = await p.evaluate(async () => {
        const r = JSON.parse(sessionStorage.getItem("ichor.refresh"));
        return (await fetch(r.revocationEndpoint, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({ token: r.refreshToken, client_id: r.clientId }),
        })).status;
      });
      assert.equal(status, 200);
      await p.clock.fastForward(60_000);
      await p.getByRole("heading", { name: "Sign in to Ichor" }).waitFor({ timeout: 10_000 });
      await p.getByText("Your session ended. Sign in again.").waitFor();
      assert.equal(b.seen.statuses[400], 1, `the refused refresh: ${JSON.stringify(b.seen.statuses)}`);
      assert.equal(await p.evaluate(() => sessionStorage.getItem("ichor.refresh")), null, "the tokens are dropped");
    });
  } finally {
    for (const b of open) await b.close();
    if (dev) await dev.cleanup();
  }
}

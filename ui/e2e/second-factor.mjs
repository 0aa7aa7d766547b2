// The second sign-in step in Chromium, against run.mjs's `ichor dev`: a user with an
// authenticator app and recovery codes (seeded into the issuer's credentials file while it is
// stopped, as an enrolment would leave the entry) signs in on the SPA's card (password, a wrong
// code refused in English and, after the language switch, in Japanese, then the app's code) and
// through `ichor auth login`'s page in a Japanese browser (a wrong code, then a recovery code),
// a recovery code works once, a password change asks for a code too (a wrong one refused) and
// signs the tab in again through the step, and a
// step whose sign-in the admin revoked meanwhile says to start again. The codes are computed here (RFC 6238: HMAC-SHA-1, 30 s,
// 6 digits, with WebCrypto). Every new step is checked with axe.

import { createHash, webcrypto } from "node:crypto";
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import assert from "node:assert/strict";
import { launch, signIn, test, watchCsp } from "./harness.mjs";
import { audit } from "./checks.mjs";
import { alertText, startLogin } from "./cli-login.mjs";

/** The authenticator app's secret (base32, 160 bits; the Rust test kit's `TOTP_SECRET`). */
const TOTP_SECRET = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ";
/** The recovery codes, as they are shown to the user. */
const RECOVERY = ["JBSW-Y3DP-EHPK-3PXP", "KRUG-S4ZA-NFZS-AYJA", "MFRG-GZDF-MZTW-Q2LK", "NBSW-Y3DP-EB3W-64TM"];

function base32(text) {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  let bits = 0;
  let value = 0;
  const out = [];
  for (const c of text) {
    value = (value << 5) | alphabet.indexOf(c);
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return new Uint8Array(out);
}

/** The RFC 6238 code of `secret` for the 30-second step `step` (HMAC-SHA-1, 6 digits). */
export async function totpAt(secret, step) {
  const key = await webcrypto.subtle.importKey("raw", base32(secret), { name: "HMAC", hash: "SHA-1" }, false, ["sign"]);
  const counter = new DataView(new ArrayBuffer(8));
  counter.setBigUint64(0, BigInt(step));
  const mac = new Uint8Array(await webcrypto.subtle.sign("HMAC", key, counter.buffer));
  const at = mac[19] & 0x0f;
  const n = ((mac[at] & 0x7f) << 24) | (mac[at + 1] << 16) | (mac[at + 2] << 8) | mac[at + 3];
  return String(n % 1_000_000).padStart(6, "0");
}

const stepNow = () => Math.floor(Date.now() / 30_000);

/** A six-digit code that is none of the codes the issuer accepts around now. */
async function wrongCode() {
  const s = stepNow();
  const near = await Promise.all([s - 2, s - 1, s, s + 1, s + 2].map((x) => totpAt(TOTP_SECRET, x)));
  for (let n = 0; ; n++) {
    const c = String((Number(near[2]) + 500_000 + n) % 1_000_000).padStart(6, "0");
    if (!near.includes(c)) return c;
  }
}

/** The claims of a JWT. */
const claimsOf = (t) => JSON.parse(Buffer.from(t.split(".")[1], "base64url").toString("utf8"));

/**
 * Gives `user` an authenticator app of [`TOTP_SECRET`] and the [`RECOVERY`] codes: the issuer is
 * stopped, its credentials file rewritten as a write of its own would leave it (a new file
 * renamed into place, 0600), and started again on the same port and state.
 */
async function enrol(dev, user) {
  await dev.stop();
  const file = join(dev.state, "dev", "issuer", "credentials.json");
  const doc = JSON.parse(readFileSync(file, "utf8"));
  const entry = doc.entries[user];
  assert.ok(entry, `${user} has a credentials entry`);
  assert.equal(entry.mustChange, false, `${user} has chosen a password`);
  const createdAt = new Date(Date.now() - 86_400_000).toISOString();
  entry.v = 2;
  entry.factors = {
    totp: { secret: TOTP_SECRET, createdAt, lastStep: 0 },
    recovery: {
      digests: RECOVERY.map((c) => createHash("sha256").update(c.replaceAll("-", "")).digest("hex")),
      createdAt,
    },
  };
  doc.generation += 1;
  const next = `${file}.e2e`;
  writeFileSync(next, JSON.stringify(doc), { mode: 0o600 });
  renameSync(next, file);
  await dev.start();
}

/**
 * The second-factor tests; `dev` is run.mjs's issuer, `user` a user with `password` and no factor
 * yet, `adminPassword` the admin's.
 */
export async function secondFactor({ dev, user, password, adminPassword }) {
  await enrol(dev, user);
  const en = await launch(dev.ca, "en-US");
  const ja = await launch(dev.ca, "ja-JP");
  watchCsp(en.context);
  watchCsp(ja.context);
  const home = mkdtempSync(join(tmpdir(), "ichor-ui-cli-home-"));
  try {
    const page = en.page;
    await test("second factor: after the password the SPA asks for the code, focused, with a hint", async () => {
      await page.goto(dev.base);
      await page.getByRole("heading", { name: "Sign in to Ichor" }).waitFor();
      await signIn(page, user, password);
      await page.getByRole("heading", { name: "Two-step verification" }).waitFor();
      const field = page.getByLabel("Verification code");
      assert.equal(await field.getAttribute("autocomplete"), "one-time-code");
      assert.equal(await field.getAttribute("maxlength"), "64");
      await page.waitForFunction(() => document.activeElement?.getAttribute("name") === "code");
      const hint = await page.evaluate(() => {
        const input = document.querySelector("input[name=code]");
        return input.getAttribute("aria-describedby").split(" ").map((id) => document.getElementById(id).textContent).join(" ");
      });
      assert.equal(hint, "Enter the 6-digit code from your authenticator app, or one of your recovery codes.");
      assert.equal(await page.evaluate(() => sessionStorage.getItem("ichor.token")), null, "no token yet");
      await audit(page, "en-second-factor");
      await page.getByRole("button", { name: "Verify" }).click();
      await page.getByText("Enter the code.").waitFor();
    });

    await test("second factor: a wrong code is refused in English, and in Japanese after the switch", async () => {
      await page.getByLabel("Verification code").fill(await wrongCode());
      await page.getByRole("button", { name: "Verify" }).click();
      assert.equal(await alertText(page), "The code is incorrect or was used already.");
      assert.equal(await page.getByLabel("Verification code").inputValue(), "", "the field is emptied for the next code");
      await page.waitForFunction(() => document.activeElement?.getAttribute("name") === "code");
      await audit(page, "en-second-factor-error");
      await page.getByLabel("Language").selectOption("ja");
      await page.getByRole("heading", { name: "2 段階認証" }).waitFor();
      assert.equal(await alertText(page), "コードが正しくないか、すでに使用されています。");
      await audit(page, "ja-second-factor-error");
      assert.equal(await page.evaluate(() => sessionStorage.getItem("ichor.token")), null, "no token yet");
    });

    await test("second factor: the app's code signs in, and the ID token says how", async () => {
      await page.getByLabel("確認コード").fill(await totpAt(TOTP_SECRET, stepNow()));
      await page.getByRole("button", { name: "確認", exact: true }).click();
      await page.getByRole("button", { name: "アカウントメニュー" }).waitFor({ timeout: 20_000 });
      const token = await page.evaluate(() => sessionStorage.getItem("ichor.token"));
      const claims = claimsOf(token);
      assert.equal(claims.sub, user);
      assert.deepEqual(claims.amr, ["pwd", "otp", "mfa"]);
      await page.getByLabel("言語").selectOption("en");
    });

    await test("ichor auth login: the card's second step in Japanese, a wrong code, then a recovery code", async () => {
      const login = startLogin(dev, home);
      let done = false;
      try {
        const { url, port } = await login.printed;
        const p = ja.page;
        await p.goto(url);
        await p.getByRole("heading", { name: "Ichor にサインイン" }).waitFor();
        await p.getByLabel("ユーザー名").fill(user);
        await p.getByLabel("パスワード", { exact: true }).fill(password);
        await Promise.all([p.waitForEvent("load"), p.getByRole("button", { name: "サインイン", exact: true }).click()]);
        await p.getByRole("heading", { name: "2 段階認証" }).waitFor();
        assert.match(p.url(), /\/oidc\/login$/);
        assert.ok((await p.getByTestId("sign-in-purpose").textContent()).includes(`ポート ${port} で待っている`));
        assert.equal(await p.getByLabel("確認コード").getAttribute("autocomplete"), "one-time-code");
        await p.waitForFunction(() => document.activeElement?.getAttribute("name") === "code");
        assert.equal(await p.locator("#code-hint").textContent(),
          "認証アプリに表示されている 6 桁のコード、またはリカバリーコードのいずれかを入力してください。");
        await audit(p, "ja-cli-second-factor");
        await p.getByLabel("確認コード").fill(await wrongCode());
        const [wrong] = await Promise.all([p.waitForEvent("response", (r) => r.url().endsWith("/oidc/login/factor")),
          p.getByRole("button", { name: "確認", exact: true }).click()]);
        assert.equal(wrong.status(), 401);
        await p.waitForEvent("load");
        assert.equal(await alertText(p), "コードが正しくないか、すでに使用されています。");
        await audit(p, "ja-cli-second-factor-error");
        await p.getByLabel("確認コード").fill(RECOVERY[0]);
        await Promise.all([
          p.waitForURL(new RegExp(`^http://127\\.0\\.0\\.1:${port}/callback\\?`), { timeout: 20_000 }),
          p.getByRole("button", { name: "確認", exact: true }).click(),
        ]);
        const { code, stderr } = await login.exit;
        done = true;
        assert.equal(code, 0, stderr);
        assert.match(stderr, new RegExp(`Signed in to \\S+ as ${user} `));
      } finally {
        if (!done) login.child.kill("SIGTERM");
      }
    });

    await test("second factor: a recovery code works once", async () => {
      await page.getByRole("button", { name: "Account menu" }).click();
      await page.getByRole("menuitem", { name: "Sign out", exact: true }).click();
      await page.getByRole("heading", { name: "Sign in to Ichor" }).waitFor();
      await signIn(page, user, password);
      await page.getByLabel("Verification code").fill(RECOVERY[0]);
      await page.getByRole("button", { name: "Verify" }).click();
      assert.equal(await alertText(page), "The code is incorrect or was used already.", "used by the CLI's sign-in");
      await page.getByLabel("Verification code").fill(RECOVERY[1].toLowerCase());
      await page.getByRole("button", { name: "Verify" }).click();
      await page.getByRole("button", { name: "Account menu" }).waitFor({ timeout: 20_000 });
      const claims = claimsOf(await page.evaluate(() => sessionStorage.getItem("ichor.token")));
      assert.deepEqual(claims.amr, ["pwd", "otp", "mfa"]);
    });
    await test("second factor: a password change asks for a code too, and signs the tab in again through the step", async () => {
      const next = `${password}-2`;
      const form = page.getByTestId("change-password");
      await form.getByText("You have a second factor: confirm the change with a current code too.", { exact: false }).waitFor();
      const code = form.getByLabel("Code from your app, or a recovery code");
      assert.equal(await code.getAttribute("autocomplete"), "one-time-code");
      const hint = await page.evaluate(() => {
        const input = document.querySelector("[data-testid=change-password] input[name=code]");
        return input.getAttribute("aria-describedby").split(" ").map((id) => document.getElementById(id).textContent).join(" ");
      });
      assert.equal(hint, "Enter the 6-digit code from your authenticator app, or one of your recovery codes.");
      await form.getByLabel("Current password").fill(password);
      await form.getByLabel("New password", { exact: true }).fill(next);
      await form.getByLabel("Repeat the new password").fill(next);
      await form.getByRole("button", { name: "Change password" }).click();
      await form.getByText("Enter the code.").waitFor();
      // A wrong code: refused and emptied; the password stays, so the same form goes on.
      await code.fill(await wrongCode());
      await form.getByRole("button", { name: "Change password" }).click();
      assert.equal(await alertText(form), "Refused: The code is incorrect or was used already.");
      assert.equal(await code.inputValue(), "", "the refused code is cleared");
      await page.waitForFunction(() => document.activeElement?.getAttribute("name") === "code");
      await audit(page, "en-change-password-code-error");
      await code.fill(RECOVERY[3]);
      await form.getByRole("button", { name: "Change password" }).click();
      await page.getByRole("heading", { name: "Two-step verification", level: 2 }).waitFor({ timeout: 20_000 });
      await page.waitForFunction(() => document.activeElement?.getAttribute("name") === "code");
      await audit(page, "en-second-factor-after-change");
      await page.getByLabel("Verification code").fill(RECOVERY[2]);
      await Promise.all([page.waitForEvent("load", { timeout: 30_000 }), page.getByRole("button", { name: "Verify" }).click()]);
      await page.getByRole("button", { name: "Account menu" }).waitFor({ timeout: 20_000 });
      assert.deepEqual(claimsOf(await page.evaluate(() => sessionStorage.getItem("ichor.token"))).amr, ["pwd", "otp", "mfa"]);
      password = next;
    });

    await test("second factor: a step whose sign-in was revoked meanwhile says to start again", async () => {
      await page.getByRole("button", { name: "Account menu" }).click();
      await page.getByRole("menuitem", { name: "Sign out", exact: true }).click();
      await page.getByRole("heading", { name: "Sign in to Ichor" }).waitFor();
      await signIn(page, user, password);
      await page.getByRole("heading", { name: "Two-step verification" }).waitFor();
      // The admin, in the other browser, ends the user's sessions: the entry's notBefore moves.
      const admin = ja.page;
      await admin.goto(dev.base);
      await admin.getByLabel("ユーザー名").fill("admin");
      await admin.getByLabel("パスワード", { exact: true }).fill(adminPassword);
      await admin.getByRole("button", { name: "サインイン", exact: true }).click();
      await admin.getByRole("link", { name: "ユーザー" }).click();
      const row = admin.locator(`tr[data-user="${user}"]`);
      await row.getByRole("button", { name: "セッションを取り消す" }).click();
      await row.getByRole("status").waitFor();
      await page.getByLabel("Verification code").fill(await totpAt(TOTP_SECRET, stepNow()));
      await page.getByRole("button", { name: "Verify" }).click();
      assert.equal(await alertText(page), "This sign-in is no longer valid. Start again.");
      assert.ok(await page.getByLabel("Verification code").isDisabled(), "no code can be sent any more");
      assert.equal(await page.getByRole("button", { name: "Verify" }).count(), 0);
      await page.waitForFunction(() => document.activeElement?.textContent === "Start again");
      await audit(page, "en-second-factor-expired");
      await page.getByRole("button", { name: "Start again" }).click();
      await page.getByRole("heading", { name: "Sign in to Ichor" }).waitFor();
      assert.equal(await page.getByLabel("User name").inputValue(), user, "the user name is kept");
      assert.equal(await page.evaluate(() => sessionStorage.getItem("ichor.token")), null);
    });
  } finally {
    await en.close();
    await ja.close();
    rmSync(home, { recursive: true, force: true });
  }
}

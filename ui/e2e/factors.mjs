// The account page's "Sign-in methods" in Chromium, against run.mjs's `ichor dev`: `user` (with
// `password`, no second factor yet) sets up an authenticator app (the password, the QR code and
// the setup key, the app's first code computed here from the key shown, RFC 6238: HMAC-SHA-1,
// 30 s, 6 digits), sees the ten recovery codes once in their dialog (copied, downloaded), signs
// in again through the second step, signs out and in with the password and an app code, makes
// new recovery codes in Japanese, is held back after wrong codes at the sign-in's second step (the
// issuer's 429, shown with its wait), and removes the app. The screen of a user the policy
// requires to enrol is shown with the policy's refusal of the API played by the test (ichor dev
// runs with the policy off). Every new view is checked with axe, in English and Japanese.

import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import assert from "node:assert/strict";
import { launch, signIn, test, watchCsp } from "./harness.mjs";
import { audit } from "./checks.mjs";
import { alertText } from "./cli-login.mjs";

/** The bytes of an RFC 4648 base32 text. */
function base32(text) {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  let bits = 0;
  let value = 0;
  const out = [];
  for (const c of text) {
    const v = alphabet.indexOf(c);
    assert.ok(v >= 0, `base32 character ${c}`);
    value = ((value << 5) | v) & 0xffff;
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return Buffer.from(out);
}

/** The RFC 6238 code of `secret` (base32) for the 30-second step `step`: HMAC-SHA-1, 6 digits. */
export function totp(secret, step) {
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(step));
  const mac = createHmac("sha1", base32(secret)).update(counter).digest();
  const at = mac[19] & 0x0f;
  const n = mac.readUInt32BE(at) & 0x7fffffff;
  return String(n % 1_000_000).padStart(6, "0");
}

const stepNow = () => Math.floor(Date.now() / 30_000);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Waits, when the current step ends within `margin` seconds, for the next one to start. */
async function awayFromStepEnd(margin = 5) {
  const left = 30 - ((Date.now() / 1000) % 30);
  if (left < margin) await sleep(left * 1000 + 300);
}

/** A six-digit code that is none of the codes of `secret` around now. */
function wrongCode(secret) {
  const s = stepNow();
  const near = [s - 2, s - 1, s, s + 1, s + 2].map((x) => totp(secret, x));
  for (let n = 0; ; n++) {
    const c = String((Number(near[2]) + 500_000 + n) % 1_000_000).padStart(6, "0");
    if (!near.includes(c)) return c;
  }
}

/** The claims of a JWT. */
const claimsOf = (t) => JSON.parse(Buffer.from(t.split(".")[1], "base64url").toString("utf8"));
const token = (page) => page.evaluate(() => sessionStorage.getItem("ichor.token"));

/** Everything the page keeps in its storage, as one string. */
const storage = (page) => page.evaluate(() => JSON.stringify([{ ...sessionStorage }, { ...localStorage }]));

/** The recovery codes the dialog shows. */
async function dialogCodes(page) {
  const dialog = page.getByRole("dialog");
  await dialog.waitFor();
  return (await dialog.locator("ol.codes code").allTextContents()).map((c) => c.trim());
}

const RECOVERY_CODE = /^[A-Z2-7]{4}-[A-Z2-7]{4}-[A-Z2-7]{4}-[A-Z2-7]{4}$/;

/**
 * The request `route` holds, sent on to the issuer from Node (trusting `ca`, as the browser
 * does): its answer's status, headers and body.
 */
async function passOn(route, ca) {
  const r = route.request();
  // Uncompressed, so that the answer can be read and changed.
  const { "accept-encoding": _, ...headers } = await r.allHeaders();
  return new Promise((resolve, reject) => {
    const req = httpsRequest(r.url(), { method: r.method(), headers, ca: readFileSync(ca) }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve({
        status: res.statusCode,
        headers: Object.fromEntries(Object.entries(res.headers)
          .filter(([k]) => !["content-length", "transfer-encoding", "connection"].includes(k))
          .map(([k, v]) => [k, [v].flat().join(", ")])),
        body: Buffer.concat(chunks),
      }));
    });
    req.on("error", reject);
    req.end(r.postDataBuffer() ?? undefined);
  });
}

/**
 * The account page's second-factor tests; `dev` is run.mjs's issuer, `user` a user with
 * `password` and no second factor (left without one at the end).
 */
export async function factors({ dev, user, password }) {
  const b = await launch(dev.ca, "en-US");
  watchCsp(b.context);
  await b.context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: dev.base });
  const page = b.page;
  const methods = page.getByTestId("sign-in-methods");
  let secret = "";
  let codes = [];
  let lastStep = 0;
  try {
    await test("factors: the account page lists no second factor and offers an authenticator app", async () => {
      await page.goto(dev.base);
      await signIn(page, user, password);
      await page.getByRole("heading", { name: "Account", level: 1 }).waitFor({ timeout: 20_000 });
      await methods.getByRole("heading", { name: "Sign-in methods" }).waitFor();
      await methods.getByText("You have no second factor yet: a sign-in asks for your password alone.").waitFor();
      assert.equal(await methods.getByRole("listitem").count(), 0);
      await audit(page, "en-factors-none");
    });

    await test("factors: setting up an app asks for the password, then shows the QR code and the key", async () => {
      await methods.getByRole("button", { name: "Set up an authenticator app" }).click();
      const form = page.getByTestId("totp-enrol");
      await page.waitForFunction(() => document.activeElement?.getAttribute("name") === "password" &&
        document.activeElement.closest("[data-testid=totp-enrol]") !== null);
      await form.getByRole("button", { name: "Continue" }).click();
      await form.getByText("Enter your current password.").waitFor();
      await form.getByLabel("Current password").fill(`${password}-wrong`);
      await form.getByRole("button", { name: "Continue" }).click();
      assert.equal(await alertText(form), "Refused: The current password is incorrect.");
      await audit(page, "en-factors-enrol-password");
      await form.getByLabel("Current password").fill(password);
      await form.getByRole("button", { name: "Continue" }).click();
      await form.getByRole("heading", { name: "Scan the QR code" }).waitFor();
      await page.waitForFunction(() => document.activeElement?.id === "scan-title");
      const qr = form.getByRole("img", { name: "QR code to add this account to an authenticator app" });
      assert.ok((await qr.boundingBox()).width >= 150, "the QR code is drawn large enough to scan");
      assert.ok((await qr.locator("path").getAttribute("d")).length > 500, "the QR code has modules");
      const shown = (await form.getByTestId("totp-secret").textContent()).trim();
      assert.match(shown, /^([A-Z2-7]{4} ){7}[A-Z2-7]{4}$/, "the key in groups of four");
      secret = shown.replaceAll(" ", "");
      await form.getByRole("button", { name: "Copy the key" }).click();
      await form.getByText("Copied.").waitFor();
      assert.equal(await page.evaluate(() => navigator.clipboard.readText()), secret, "the key is copied without spaces");
      assert.ok(!(await storage(page)).includes(secret), "the key is kept in no storage");
      const field = form.getByLabel("Code from the app");
      assert.equal(await field.getAttribute("autocomplete"), "one-time-code");
      assert.equal(await field.getAttribute("inputmode"), "numeric");
      await audit(page, "en-factors-enrol-scan");
      await page.getByLabel("Language").selectOption("ja");
      await form.getByRole("heading", { name: "QR コードの読み取り" }).waitFor();
      assert.equal((await form.getByTestId("totp-secret").textContent()).trim(), shown, "the same key after the switch");
      await audit(page, "ja-factors-enrol-scan");
      await page.getByLabel("言語").selectOption("en");
      await field.fill("12345");
      await form.getByRole("button", { name: "Add the app" }).click();
      await form.getByText("Enter the 6 digits the app shows.").waitFor();
      await field.fill(wrongCode(secret));
      await form.getByRole("button", { name: "Add the app" }).click();
      assert.match(await alertText(form), /^Refused: That is not the code the app shows now\./);
      await audit(page, "en-factors-enrol-error");
    });

    await test("factors: the app's first code adds it, and the ten recovery codes are shown once", async () => {
      // The previous step's code (the issuer takes it too): the sign-ins that follow can use the
      // current one at once.
      await awayFromStepEnd();
      lastStep = stepNow() - 1;
      const form = page.getByTestId("totp-enrol");
      await form.getByLabel("Code from the app").fill(totp(secret, lastStep));
      await form.getByRole("button", { name: "Add the app" }).click();
      codes = await dialogCodes(page);
      assert.equal(codes.length, 10);
      assert.equal(new Set(codes).size, 10);
      for (const c of codes) assert.match(c, RECOVERY_CODE);
      const dialog = page.getByRole("dialog", { name: "Your recovery codes" });
      assert.equal(await dialog.getAttribute("aria-describedby"), "codes-once");
      await dialog.getByText("They will not be shown again: copy or download them now.").waitFor();
      await page.waitForFunction(() => document.activeElement?.id === "codes-title");
      assert.equal(await token(page), null, "the change ended the tab's session: its tokens are dropped");
      await audit(page, "en-factors-codes");
      await dialog.getByRole("button", { name: "Copy the codes" }).click();
      await dialog.getByText("Copied.").waitFor();
      assert.equal(await page.evaluate(() => navigator.clipboard.readText()), codes.join("\n"));
      const [download] = await Promise.all([
        page.waitForEvent("download", { timeout: 15_000 }),
        dialog.getByRole("button", { name: "Download as a text file" }).click(),
      ]);
      assert.equal(download.suggestedFilename(), `ichor-recovery-codes-${user}.txt`);
      const text = readFileSync(await download.path(), "utf8");
      assert.match(text, new RegExp(`^Ichor recovery codes for ${user}, made .+\\. Each code works once\\.\\n${dev.base}\\n\\n`));
      assert.deepEqual(text.trim().split("\n").slice(-10), codes);
      // Escape does not close it: nothing brings the codes back.
      await page.keyboard.press("Escape");
      assert.ok(await dialog.isVisible(), "the dialog stays open on Escape");
      await dialog.getByRole("button", { name: "I have saved them" }).click();
      await page.getByRole("heading", { name: "Two-step verification", level: 2 }).waitFor({ timeout: 20_000 });
      assert.equal(await page.getByRole("dialog").count(), 0);
      assert.ok(!(await page.content()).includes(codes[1]), "the codes are gone from the page");
      await page.getByText("The change ended your sessions. Sign in again").waitFor();
      await page.waitForFunction(() => document.activeElement?.getAttribute("name") === "code");
      await audit(page, "en-factors-sign-in-again");
      await page.getByLabel("Verification code").fill(codes[0]);
      await Promise.all([page.waitForEvent("load", { timeout: 30_000 }), page.getByRole("button", { name: "Verify" }).click()]);
      await methods.locator("li[data-factor=totp]").waitFor({ timeout: 20_000 });
      assert.deepEqual(claimsOf(await token(page)).amr, ["pwd", "otp", "mfa"]);
      await methods.locator("li[data-factor=totp]").getByText(/^Added [A-Z][a-z]{2} \d{1,2}, \d{4}/).waitFor();
      await methods.locator("li[data-factor=recovery]").getByText("9 unused codes left.").waitFor();
      await methods.getByText("After your password, a sign-in asks for one of these.").waitFor();
      assert.equal(await methods.getByRole("button", { name: "Set up an authenticator app" }).count(), 0);
      await audit(page, "en-factors-list");
    });

    await test("factors: signing out and in again asks for the password and the app's code", async () => {
      await page.getByRole("button", { name: "Account menu" }).click();
      await page.getByRole("menuitem", { name: "Sign out", exact: true }).click();
      await page.getByRole("heading", { name: "Sign in to Ichor" }).waitFor();
      await signIn(page, user, password);
      await page.getByRole("heading", { name: "Two-step verification" }).waitFor();
      await awayFromStepEnd(3);
      const step = stepNow();
      assert.ok(step > lastStep);
      await page.getByLabel("Verification code").fill(totp(secret, step));
      await page.getByRole("button", { name: "Verify" }).click();
      await methods.locator("li[data-factor=totp]").waitFor({ timeout: 20_000 });
      lastStep = step;
      assert.deepEqual(claimsOf(await token(page)).amr, ["pwd", "otp", "mfa"]);
    });

    await test("factors: new recovery codes in Japanese, over the password and a code", async () => {
      await page.getByLabel("Language").selectOption("ja");
      await methods.getByRole("heading", { name: "サインイン方法" }).waitFor();
      await methods.locator("li[data-factor=recovery]").getByText("未使用のコードが残り 9 個あります。").waitFor();
      await audit(page, "ja-factors-list");
      await methods.getByRole("button", { name: "新しいリカバリーコードを作成" }).click();
      const form = page.getByTestId("factor-change");
      await form.getByRole("button", { name: "新しいリカバリーコードを作成" }).click();
      await form.getByText("現在のパスワードを入力してください。").waitFor();
      await form.getByText("コードを入力してください。").waitFor();
      const code = form.getByLabel("アプリのコード、またはリカバリーコード");
      assert.equal(await code.getAttribute("autocomplete"), "one-time-code");
      await form.getByLabel("現在のパスワード").fill(password);
      await code.fill(wrongCode(secret));
      await form.getByRole("button", { name: "新しいリカバリーコードを作成" }).click();
      assert.equal(await alertText(form), "拒否されました: コードが正しくないか、すでに使用されています。");
      assert.equal(await code.inputValue(), "", "the refused code is cleared");
      await audit(page, "ja-factors-regenerate");
      await code.fill(codes[1]);
      await form.getByRole("button", { name: "新しいリカバリーコードを作成" }).click();
      const fresh = await dialogCodes(page);
      assert.equal(fresh.length, 10);
      assert.ok(fresh.every((c) => RECOVERY_CODE.test(c) && !codes.includes(c)), "ten new codes");
      await page.getByRole("dialog", { name: "リカバリーコード" }).getByText("これらのコードは二度と表示されません").waitFor();
      await audit(page, "ja-factors-codes");
      await page.getByRole("button", { name: "保存しました" }).click();
      await page.getByRole("heading", { name: "2 段階認証", level: 2 }).waitFor({ timeout: 20_000 });
      await audit(page, "ja-factors-sign-in-again");
      // An old code no longer works; a new one does.
      await page.getByLabel("確認コード").fill(codes[2]);
      await page.getByRole("button", { name: "確認", exact: true }).click();
      assert.equal(await alertText(page), "コードが正しくないか、すでに使用されています。");
      await page.getByLabel("確認コード").fill(fresh[0]);
      await Promise.all([page.waitForEvent("load", { timeout: 30_000 }),
        page.getByRole("button", { name: "確認", exact: true }).click()]);
      await methods.locator("li[data-factor=recovery]").getByText("未使用のコードが残り 9 個あります。").waitFor({ timeout: 20_000 });
      codes = fresh;
      await page.getByLabel("言語").selectOption("en");
    });

    await test("factors: wrong codes at the sign-in's second step are held back (429), and the page says how long", async () => {
      await page.getByRole("button", { name: "Account menu" }).click();
      await page.getByRole("menuitem", { name: "Sign out", exact: true }).click();
      await page.getByRole("heading", { name: "Sign in to Ichor" }).waitFor();
      await signIn(page, user, password);
      await page.getByRole("heading", { name: "Two-step verification" }).waitFor();
      let limited = null;
      for (let i = 0; i < 10 && !limited; i++) {
        await page.getByLabel("Verification code").fill(wrongCode(secret));
        const [answer] = await Promise.all([
          page.waitForResponse((r) => r.url().endsWith("/oidc/login/factor")),
          page.getByRole("button", { name: "Verify" }).click(),
        ]);
        await page.waitForFunction(() => document.querySelector("[role=alert]") &&
          document.querySelector("input[name=code]")?.value === "");
        if (answer.status() === 429) limited = { answer, text: await alertText(page), attempt: i + 1 };
        else assert.equal(answer.status(), 401);
      }
      assert.ok(limited, "the issuer held the step back after wrong codes");
      const seconds = Number(limited.answer.headers()["retry-after"]);
      assert.ok(seconds >= 1, "Retry-After is sent");
      assert.equal(limited.text, `Too many sign-in attempts. Wait ${seconds} seconds and try again.`);
      await audit(page, "en-second-factor-limited");
      await page.getByLabel("Language").selectOption("ja");
      assert.equal(await alertText(page), `サインインの試行回数が多すぎます。${seconds} 秒待ってから、もう一度お試しください。`);
      await audit(page, "ja-second-factor-limited");
      await page.getByLabel("言語").selectOption("en");
      await sleep(seconds * 1000 + 500);
      await page.getByLabel("Verification code").fill(codes[1]);
      await page.getByRole("button", { name: "Verify" }).click();
      await methods.locator("li[data-factor=totp]").waitFor({ timeout: 20_000 });
    });

    await test("factors: a user the policy requires to enrol sees only the enrolment", async () => {
      // ichor dev runs with the policy off: WhoAmI's real answer is passed on with
      // `must_enrol` (field 7, a varint) set, as the issuer answers when the policy holds.
      await page.route("**/ichor.v1alpha1.UserService/WhoAmI", async (route) => {
        const answer = await passOn(route, dev.ca);
        const body = answer.body;
        assert.equal(body[0], 0, "a gRPC-web data frame first");
        const length = body.readUInt32BE(1);
        const message = Buffer.concat([body.subarray(5, 5 + length), Buffer.from([7 << 3, 1])]);
        const frame = Buffer.alloc(5);
        frame.writeUInt32BE(message.length, 1);
        await route.fulfill({
          status: answer.status,
          headers: answer.headers,
          body: Buffer.concat([frame, message, body.subarray(5 + length)]),
        });
      });
      try {
        await page.reload();
        await page.getByRole("heading", { name: "Set up a second factor", level: 1 }).waitFor({ timeout: 20_000 });
        await page.getByText("Your account requires a second factor.").waitFor();
        await page.getByTestId("totp-enrol").getByLabel("Current password").waitFor();
        for (const gone of ["Users", "Account"]) assert.equal(await page.getByRole("link", { name: gone }).count(), 0);
        assert.equal(await page.getByRole("button", { name: "Download my kubeconfig" }).count(), 0);
        assert.equal(await page.getByRole("button", { name: "Change password" }).count(), 0);
        await audit(page, "en-must-enrol");
        // A passkey is the other way out (this issuer, named by an IP address, refuses to make one).
        await page.getByRole("button", { name: "Add a passkey instead" }).click();
        await page.getByRole("heading", { name: "Add a passkey", level: 2 }).waitFor();
        await page.waitForFunction(() => document.activeElement?.closest("[data-testid=passkey-enrol]") !== null);
        await audit(page, "en-must-enrol-passkey");
        await page.getByTestId("passkey-enrol").getByRole("button", { name: "Cancel" }).click();
        await page.waitForFunction(() => document.activeElement?.textContent === "Add a passkey instead");
        await page.getByLabel("Language").selectOption("ja");
        await page.getByRole("heading", { name: "2 段階認証の設定", level: 1 }).waitFor();
        await audit(page, "ja-must-enrol");
        await page.getByLabel("言語").selectOption("en");
      } finally {
        await page.unroute("**/ichor.v1alpha1.UserService/WhoAmI");
      }
      await page.reload();
      await methods.locator("li[data-factor=totp]").waitFor({ timeout: 20_000 });
    });

    await test("factors: removing the app, confirmed with the password and a code, leaves the password alone", async () => {
      await methods.getByRole("button", { name: "Remove: Authenticator app" }).click();
      const form = page.getByTestId("factor-change");
      await form.getByRole("heading", { name: "Remove: Authenticator app" }).waitFor();
      await form.getByText("Your recovery codes are removed with it, and sign-ins ask for your password alone.").waitFor();
      await audit(page, "en-factors-remove");
      await page.getByLabel("Language").selectOption("ja");
      await form.getByRole("heading", { name: "削除: 認証アプリ" }).waitFor();
      await audit(page, "ja-factors-remove");
      await page.getByLabel("言語").selectOption("en");
      await form.getByRole("button", { name: "Cancel" }).click();
      assert.equal(await page.getByTestId("factor-change").count(), 0);
      await page.waitForFunction(() => document.activeElement?.getAttribute("aria-label") === "Remove: Authenticator app");
      await methods.getByRole("button", { name: "Remove: Authenticator app" }).click();
      await form.getByLabel("Current password").fill(password);
      await form.getByLabel("Code from your app, or a recovery code").fill(codes[2]);
      await Promise.all([page.waitForEvent("load", { timeout: 30_000 }), form.getByRole("button", { name: "Remove" }).click()]);
      await methods.getByText("You have no second factor yet: a sign-in asks for your password alone.").waitFor({ timeout: 20_000 });
      assert.deepEqual(claimsOf(await token(page)).amr ?? ["pwd"], ["pwd"]);
      await page.getByRole("button", { name: "Account menu" }).click();
      await page.getByRole("menuitem", { name: "Sign out", exact: true }).click();
      await signIn(page, user, password);
      await methods.getByRole("button", { name: "Set up an authenticator app" }).waitFor({ timeout: 20_000 });
      assert.equal(await page.getByRole("heading", { name: "Two-step verification" }).count(), 0, "no second step");
    });
  } finally {
    await b.close();
  }
}

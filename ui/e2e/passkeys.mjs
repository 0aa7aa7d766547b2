// Passkeys in Chromium with its virtual authenticator (the DevTools protocol's WebAuthn domain:
// CTAP2, internal transport, user verification), against its own `ichor dev --localhost` (WebAuthn
// needs a domain name: https://localhost:PORT): the admin adds a passkey on the account page (the
// recovery codes once, signing in again with the passkey; the same authenticator refused a second
// time), signs out and in with the password and the passkey (no code typed; the ID token's amr
// says so), in English and Japanese; a cancelled prompt leaves the step usable; `ichor auth
// login`'s page takes the passkey too; and a cloned authenticator (the same key with a lower
// signature counter) is refused and disables the passkey for the original too: the issuer's
// card no longer offers it, a recovery code signs in and the account page lists it as disabled. Adding a second passkey or an
// authenticator app beside one asks for a recovery code too. Before, against run.mjs's
// issuer named by an IP address, adding a passkey is refused with the reason. Every new view is
// checked with axe.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import assert from "node:assert/strict";
import { changePassword, launch, signIn, startDev, test, watchCsp } from "./harness.mjs";
import { audit } from "./checks.mjs";
import { alertText, startLogin } from "./cli-login.mjs";

/** The claims of a JWT. */
const claimsOf = (t) => JSON.parse(Buffer.from(t.split(".")[1], "base64url").toString("utf8"));
const token = (page) => page.evaluate(() => sessionStorage.getItem("ichor.token"));

/** A platform authenticator with user verification that answers at once. */
const AUTHENTICATOR = {
  protocol: "ctap2", transport: "internal", hasResidentKey: true, hasUserVerification: true, isUserVerified: true,
  automaticPresenceSimulation: true,
};

/** The amr of a passkey sign-in: the password, a hardware or synced key, and "mfa". */
function assertPasskeyAmr(amr) {
  assert.ok(amr.includes("pwd") && amr.includes("mfa"), `amr ${amr}`);
  assert.ok(amr.includes("hwk") || amr.includes("swk"), `amr ${amr} names a key`);
  assert.ok(!amr.includes("otp"), `amr ${amr} names no code`);
}

const focusedText = (page) => page.evaluate(() => document.activeElement?.textContent ?? "");

/**
 * Against run.mjs's issuer (named by an IP address): the account page offers a passkey (the
 * browser can make one) and shows the issuer's refusal. `user` has `password` and no factor.
 */

/** Opens the page `ichor auth login` printed, signs in there as admin with `password` and waits
 * for the second step's card; the CLI's loopback port. */
async function cliPasswordStep(page, login, password) {
  const { url, port } = await login.printed;
  await page.goto(url);
  await page.getByLabel("User name").fill("admin");
  await page.getByLabel("Password", { exact: true }).fill(password);
  await Promise.all([page.waitForEvent("load"), page.getByRole("button", { name: "Sign in", exact: true }).click()]);
  await page.getByRole("heading", { name: "Two-step verification" }).waitFor();
  return port;
}

export async function passkeyNeedsDomain({ dev, user, password }) {
  const b = await launch(dev.ca, "en-US");
  watchCsp(b.context);
  try {
    await test("passkeys: an issuer named by an IP address refuses to add one, and the page says why", async () => {
      const page = b.page;
      await page.goto(dev.base);
      await signIn(page, user, password);
      const methods = page.getByTestId("sign-in-methods");
      await methods.getByRole("button", { name: "Add a passkey" }).first().click();
      const form = page.getByTestId("passkey-enrol");
      await form.getByLabel("Current password").fill(password);
      await form.getByRole("button", { name: "Add a passkey" }).click();
      assert.match(await alertText(form), /^Refused: Passkeys need Ichor to be reached by a domain name/);
      await audit(page, "en-passkey-ip-refused");
      await form.getByRole("button", { name: "Cancel" }).click();
      assert.equal(await page.getByTestId("passkey-enrol").count(), 0);
      assert.equal(await methods.getByRole("listitem").count(), 0, "nothing was added");
    });
  } finally {
    await b.close();
  }
}

/** The passkey tests, against their own `ichor dev --localhost`. */
export async function passkeys() {
  const dev = await startDev(["--localhost"]);
  const b = await launch(dev.ca, "en-US");
  watchCsp(b.context);
  const home = mkdtempSync(join(tmpdir(), "ichor-ui-cli-home-"));
  const page = b.page;
  const methods = page.getByTestId("sign-in-methods");
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("WebAuthn.enable");
  let { authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", { options: AUTHENTICATOR });
  const password = "admin-passkey-horse-battery";
  // The recovery codes the first passkey came with.
  let codes = [];
  const credentials = async () => (await cdp.send("WebAuthn.getCredentials", { authenticatorId })).credentials;
  const signOut = async () => {
    await page.getByRole("button", { name: "Account menu" }).click();
    await page.getByRole("menuitem", { name: "Sign out", exact: true }).click();
    await page.getByRole("heading", { name: "Sign in to Ichor" }).waitFor();
  };
  try {
    await test("passkeys: the admin adds a passkey, sees the recovery codes once and signs in again with it", async () => {
      assert.match(dev.base, /^https:\/\/localhost:\d+$/);
      await page.goto(dev.base);
      await signIn(page, "admin", dev.password);
      await page.getByRole("heading", { name: "Choose a new password" }).waitFor();
      await changePassword(page, dev.password, password);
      await methods.getByRole("heading", { name: "Sign-in methods" }).waitFor({ timeout: 20_000 });
      await methods.getByRole("button", { name: "Add a passkey" }).first().click();
      const form = page.getByTestId("passkey-enrol");
      await page.waitForFunction(() => document.activeElement?.getAttribute("name") === "password" &&
        document.activeElement.closest("[data-testid=passkey-enrol]") !== null);
      assert.equal(await form.getByLabel("Passkey name").inputValue(), "Passkey", "a default name");
      await form.getByLabel("Passkey name").fill(" ");
      await form.getByRole("button", { name: "Add a passkey" }).click();
      await form.getByText("Enter your current password.").waitFor();
      await form.getByText("Enter a name for the passkey.").waitFor();
      await audit(page, "en-passkey-enrol-errors");
      await form.getByLabel("Current password").fill(`${password}-wrong`);
      await form.getByLabel("Passkey name").fill("Virtual key");
      await form.getByRole("button", { name: "Add a passkey" }).click();
      assert.equal(await alertText(form), "Refused: The current password is incorrect.");
      await page.waitForFunction(() => document.activeElement?.getAttribute("name") === "password");
      assert.equal((await credentials()).length, 0, "no passkey was made before the password was right");
      await form.getByLabel("Current password").fill(password);
      await form.getByRole("button", { name: "Add a passkey" }).click();
      const dialog = page.getByRole("dialog", { name: "Your recovery codes" });
      await dialog.waitFor({ timeout: 20_000 });
      codes = (await dialog.locator("ol.codes code").allTextContents()).map((c) => c.trim());
      assert.equal(codes.length, 10);
      assert.equal((await credentials()).length, 1, "the authenticator holds the passkey");
      assert.equal(await token(page), null, "the change ended the tab's session");
      await dialog.getByRole("button", { name: "I have saved them" }).click();
      await page.getByRole("heading", { name: "Two-step verification", level: 2 }).waitFor({ timeout: 20_000 });
      await page.getByText("The change ended your sessions. Sign in again with your passkey").waitFor();
      await page.waitForFunction(() => document.activeElement?.textContent === "Use a passkey");
      await audit(page, "en-passkey-sign-in-again");
      await Promise.all([page.waitForEvent("load", { timeout: 30_000 }),
        page.getByRole("button", { name: "Use a passkey" }).click()]);
      const row = methods.locator("li[data-factor=passkey]");
      await row.getByText("Passkey “Virtual key”").waitFor({ timeout: 20_000 });
      await row.getByText(/^Last used /).waitFor();
      await methods.locator("li[data-factor=recovery]").getByText("10 unused codes left.").waitFor();
      assertPasskeyAmr(claimsOf(await token(page)).amr);
      await audit(page, "en-passkey-list");
    });

    await test("passkeys: another passkey takes a current code besides the password; the same authenticator is not added twice", async () => {
      await methods.getByRole("button", { name: "Add a passkey" }).first().click();
      const form = page.getByTestId("passkey-enrol");
      await form.getByText("You have a second factor already: confirm with a current code too.").waitFor();
      const code = form.getByLabel("Code from your app, or a recovery code");
      assert.equal(await code.getAttribute("autocomplete"), "one-time-code");
      assert.equal(await code.getAttribute("inputmode"), "text", "a recovery code is the only kind the admin can type");
      await form.getByText("Enter one of your recovery codes.").waitFor();
      await form.getByLabel("Current password").fill(password);
      await form.getByRole("button", { name: "Add a passkey" }).click();
      await form.getByText("Enter the code.").waitFor();
      await page.waitForFunction(() => document.activeElement?.getAttribute("name") === "code");
      assert.equal(await form.getByRole("alert").count(), 0, "refused before any call");
      await audit(page, "en-passkey-enrol-code-missing");
      await code.fill("AAAA-AAAA-AAAA-AAAA");
      await form.getByRole("button", { name: "Add a passkey" }).click();
      assert.equal(await alertText(form), "Refused: The code is incorrect or was used already.");
      assert.equal(await code.inputValue(), "", "the refused code is cleared");
      await page.waitForFunction(() => document.activeElement?.getAttribute("name") === "code");
      await audit(page, "en-passkey-enrol-code-refused");
      // A right code is used up by the start; the browser then refuses to make a second passkey.
      await code.fill(codes[0]);
      await form.getByRole("button", { name: "Add a passkey" }).click();
      assert.equal(await alertText(form), "This authenticator holds one of your passkeys already.");
      assert.equal(await code.inputValue(), "", "the used code is cleared");
      await page.waitForFunction(() => document.activeElement?.getAttribute("name") === "code");
      await audit(page, "en-passkey-enrol-exists");
      await code.fill(codes[0]);
      await form.getByRole("button", { name: "Add a passkey" }).click();
      assert.equal(await alertText(form), "Refused: The code is incorrect or was used already.", "the code was used up");
      await form.getByRole("button", { name: "Cancel" }).click();
      assert.equal(await methods.locator("li[data-factor=passkey]").count(), 1);
    });

    await test("passkeys: signing in takes the password and the passkey, no code; a cancelled prompt can be retried", async () => {
      await signOut();
      await signIn(page, "admin", password);
      await page.getByRole("heading", { name: "Two-step verification", level: 1 }).waitFor();
      await page.waitForFunction(() => document.activeElement?.textContent === "Use a passkey");
      assert.equal(await page.getByLabel("Verification code").count(), 1, "the code field stays for recovery codes");
      await audit(page, "en-passkey-step");
      // The authenticator refuses the user's verification: the browser's prompt fails.
      await cdp.send("WebAuthn.setUserVerified", { authenticatorId, isUserVerified: false });
      await page.getByRole("button", { name: "Use a passkey" }).click();
      assert.match(await alertText(page), /^The passkey was not used/);
      assert.equal(await token(page), null);
      await page.waitForFunction(() => document.activeElement?.textContent === "Use a passkey");
      await audit(page, "en-passkey-cancelled");
      await cdp.send("WebAuthn.setUserVerified", { authenticatorId, isUserVerified: true });
      await page.getByLabel("Language").selectOption("ja");
      await page.getByRole("heading", { name: "2 段階認証" }).waitFor();
      assert.match(await alertText(page), /^パスキーは使用されませんでした/);
      await audit(page, "ja-passkey-step");
      const [answer] = await Promise.all([
        page.waitForResponse((r) => r.url().endsWith("/oidc/login/factor")),
        page.getByRole("button", { name: "パスキーを使用" }).click(),
      ]);
      assert.equal(answer.status(), 200);
      const sent = JSON.parse(answer.request().postData());
      assert.deepEqual(Object.keys(sent).sort(), ["credential", "factor_ticket"]);
      assert.ok(sent.credential.response.signature && sent.credential.response.authenticatorData);
      await page.getByRole("button", { name: "アカウントメニュー" }).waitFor({ timeout: 20_000 });
      assertPasskeyAmr(claimsOf(await token(page)).amr);
    });

    await test("passkeys: the account page's passkey form in Japanese", async () => {
      await methods.getByRole("button", { name: "パスキーを追加" }).click();
      const form = page.getByTestId("passkey-enrol");
      assert.equal(await form.getByLabel("パスキーの名前").inputValue(), "パスキー");
      await form.getByRole("button", { name: "パスキーを追加" }).click();
      await form.getByText("現在のパスワードを入力してください。").waitFor();
      await form.getByText("コードを入力してください。").waitFor();
      await form.getByLabel("アプリのコード、またはリカバリーコード").waitFor();
      await form.getByText("リカバリーコードのいずれかを入力してください。").waitFor();
      await audit(page, "ja-passkey-enrol");
      await form.getByRole("button", { name: "キャンセル" }).click();
      await audit(page, "ja-passkey-list");
      await page.getByLabel("言語").selectOption("en");
    });

    await test("passkeys: ichor auth login's page takes the passkey", async () => {
      const login = startLogin(dev, home);
      let done = false;
      try {
        const port = await cliPasswordStep(page, login, password);
        await page.waitForFunction(() => document.activeElement?.textContent === "Use a passkey");
        await audit(page, "en-cli-passkey-step");
        await Promise.all([
          page.waitForURL(new RegExp(`^http://127\\.0\\.0\\.1:${port}/callback\\?`), { timeout: 20_000 }),
          page.getByRole("button", { name: "Use a passkey" }).click(),
        ]);
        const { code, stderr } = await login.exit;
        done = true;
        assert.equal(code, 0, stderr);
        assert.match(stderr, /Signed in to \S+ as admin /);
      } finally {
        if (!done) login.child.kill("SIGTERM");
      }
    });

    await test("passkeys: a cloned authenticator (a lower signature counter) is refused and disables the passkey, on the card and in the SPA's list", async () => {
      const [original] = await credentials();
      assert.ok(original.signCount >= 2, `the counter moved forward (${original.signCount})`);
      // The same key on another authenticator, as a copy of the device would hold it.
      await cdp.send("WebAuthn.removeVirtualAuthenticator", { authenticatorId });
      ({ authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", { options: AUTHENTICATOR }));
      await cdp.send("WebAuthn.addCredential", { authenticatorId, credential: { ...original, signCount: 0 } });
      await page.goto(dev.base);
      await signOut();
      await signIn(page, "admin", password);
      await page.getByRole("heading", { name: "Two-step verification" }).waitFor();
      const [answer] = await Promise.all([
        page.waitForResponse((r) => r.url().endsWith("/oidc/login/factor")),
        page.getByRole("button", { name: "Use a passkey" }).click(),
      ]);
      assert.equal(answer.status(), 401);
      assert.equal(await alertText(page), "The passkey was not accepted. Try again, or use another method.");
      assert.equal(await token(page), null);
      await page.waitForFunction(() => document.activeElement?.textContent === "Use a passkey");
      await audit(page, "en-passkey-refused");

      assert.match(dev.stderr(), /signature counter did not move forward/);

      // The copy disabled the passkey for the original too: the card no longer offers it, and
      // a recovery code signs in.
      const login = startLogin(dev, home);
      let done = false;
      try {
        const port = await cliPasswordStep(page, login, password);
        assert.equal(await page.getByRole("button", { name: "Use a passkey" }).count(), 0, "the disabled passkey is not offered");
        await audit(page, "en-cli-passkey-disabled");
        await page.getByLabel("Verification code").fill(codes[1]);
        await Promise.all([
          page.waitForURL(new RegExp(`^http://127\\.0\\.0\\.1:${port}/callback\\?`), { timeout: 20_000 }),
          page.getByRole("button", { name: "Verify" }).click(),
        ]);
        const { code, stderr } = await login.exit;
        done = true;
        assert.equal(code, 0, stderr);
      } finally {
        if (!done) login.child.kill("SIGTERM");
      }

      // In the SPA too: the account page says the passkey is disabled and should be removed.
      await page.goto(dev.base);
      await signIn(page, "admin", password);
      await page.getByRole("heading", { name: "Two-step verification" }).waitFor();
      assert.equal(await page.getByRole("button", { name: "Use a passkey" }).count(), 0, "the disabled passkey is not offered");
      await page.getByLabel("Verification code").fill(codes[2]);
      await page.getByRole("button", { name: "Verify" }).click();
      const row = methods.locator("li[data-factor=passkey]");
      await row.getByText(/^Passkey “Virtual key”.* \(disabled\)$/).waitFor({ timeout: 20_000 });
      const warning = row.getByTestId("passkey-cloned");
      assert.match(await warning.textContent(),
        /^A copy of this passkey was detected, so it no longer signs you in, nor does the copy: remove it\. Copy detected [A-Z][a-z]{2} \d{1,2}, \d{4}/);
      await row.getByRole("button", { name: /^Remove: Passkey “Virtual key”.*\(disabled\)$/ }).waitFor();
      await audit(page, "en-passkey-cloned-list");
      await page.getByLabel("Language").selectOption("ja");
      await row.getByText(/^パスキー「Virtual key」.*\(無効\)$/).waitFor();
      assert.match(await warning.textContent(), /^このパスキーのコピーが検出されたため/);
      await audit(page, "ja-passkey-cloned-list");
      await page.getByLabel("言語").selectOption("en");
    });

    await test("passkeys: setting up an authenticator app beside a passkey takes a recovery code besides the password", async () => {
      await methods.getByRole("button", { name: "Set up an authenticator app" }).click();
      const form = page.getByTestId("totp-enrol");
      await form.getByText("You have a second factor already: confirm with a current code too.").waitFor();
      const code = form.getByLabel("Code from your app, or a recovery code");
      await form.getByLabel("Current password").fill(password);
      await form.getByRole("button", { name: "Continue" }).click();
      await form.getByText("Enter the code.").waitFor();
      await page.waitForFunction(() => document.activeElement?.getAttribute("name") === "code");
      // The code the sign-in just used is refused: it was used up.
      await code.fill(codes[2]);
      await form.getByRole("button", { name: "Continue" }).click();
      assert.equal(await alertText(form), "Refused: The code is incorrect or was used already.");
      assert.equal(await code.inputValue(), "", "the refused code is cleared");
      await audit(page, "en-factors-enrol-code-refused");
      await code.fill(codes[3]);
      await form.getByRole("button", { name: "Continue" }).click();
      await form.getByRole("heading", { name: "Scan the QR code" }).waitFor();
      await form.getByRole("button", { name: "Cancel" }).click();
      assert.equal(await methods.locator("li[data-factor=totp]").count(), 0, "nothing is stored before the app's first code");
    });
  } finally {
    await b.close();
    rmSync(home, { recursive: true, force: true });
    await dev.cleanup();
  }
}

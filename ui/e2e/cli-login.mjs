// `ichor auth login` in Chromium, against run.mjs's `ichor dev`: the real CLI (`--no-browser`,
// HOME a temporary directory) prints its authorization URL, and Chromium opens it at the issuer's
// sign-in page (/oidc/login?ticket=), which is the SPA's sign-in card: in English and in Japanese
// (the browser's language, and the card's language switch), naming the client and the CLI's
// loopback port, with the card's own checks, the same refusal for a wrong password and for a user
// that does not exist, a user name that is markup kept as text, and the sign-in ending at the
// CLI's callback, after which the CLI has stored the login.

import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import assert from "node:assert/strict";
import { launch, test, watchCsp } from "./harness.mjs";
import { audit } from "./checks.mjs";

/** Runs `ichor auth login`; resolves `{ url, port, exit }` once it printed its URL. */
export function startLogin(dev, home) {
  const child = spawn(process.env.ICHOR_BIN,
    ["auth", "login", "--issuer", dev.base, "--ca-file", dev.ca, "--no-browser", "--timeout", "600"],
    { env: { ...process.env, HOME: home }, stdio: ["ignore", "ignore", "pipe"] });
  let err = "";
  const exit = new Promise((resolve) => child.once("exit", (code) => resolve({ code, stderr: err })));
  const printed = new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`ichor auth login printed no URL in 30 s:\n${err}`)), 30_000);
    child.stderr.on("data", (d) => {
      err += d;
      const url = err.match(/^\s*(https:\/\/\S+\/oidc\/authorize\?\S+)\s*$/m)?.[1];
      const port = err.match(/answering at http:\/\/127\.0\.0\.1:(\d+)\/callback/)?.[1];
      if (url && port) {
        clearTimeout(t);
        resolve({ url, port: Number(port) });
      }
    });
    child.once("exit", (code) => reject(new Error(`ichor auth login exited ${code}:\n${err}`)));
  });
  return { child, exit, printed };
}

/** The card's refusal (its alert), once shown. */
export async function alertText(page) {
  const alert = page.getByRole("alert");
  await alert.waitFor();
  return (await alert.textContent()).trim();
}

/** The CLI's sign-in tests; `dev` is run.mjs's issuer, `adminPassword` the admin's current password. */
export async function cliLogin({ dev, adminPassword }) {
  const home = mkdtempSync(join(tmpdir(), "ichor-ui-cli-home-"));
  const login = startLogin(dev, home);
  const en = await launch(dev.ca, "en-US");
  const ja = await launch(dev.ca, "ja-JP");
  watchCsp(en.context);
  watchCsp(ja.context);
  const dialogs = [];
  for (const p of [en.page, ja.page]) p.on("dialog", (d) => { dialogs.push(d.message()); void d.dismiss(); });
  let signedIn = false;
  try {
    const { url, port } = await login.printed;
    const page = en.page;

    await test("ichor auth login: the issuer's page is the SPA's card, naming the CLI and its port", async () => {
      const answer = await page.goto(url);
      assert.match(page.url(), /\/oidc\/login\?ticket=/);
      const csp = answer.headers()["content-security-policy"];
      assert.match(csp, /script-src 'self';/);
      assert.doesNotMatch(csp, /unsafe/);
      assert.match(csp, new RegExp(`form-action 'self' http://127\\.0\\.0\\.1:${port}$`));
      await page.getByRole("heading", { name: "Sign in to Ichor" }).waitFor();
      assert.equal(await page.evaluate(() => document.documentElement.lang), "en");
      await page.waitForFunction(() => document.title === "Sign in to Ichor");
      const purpose = await page.getByTestId("sign-in-purpose").textContent();
      assert.equal(purpose, `Signing in the ichor CLI (kubectl, client ichor-cli) on this computer, port ${port}. ` +
        "Go on only if you just ran ichor auth login or kubectl and it printed this port.");
      // The SPA's card: its stylesheet and its language switch; no identity provider button.
      assert.equal(await page.getByLabel("Language").count(), 1);
      assert.equal(await page.getByRole("button", { name: "Sign in with your identity provider" }).count(), 0);
      await audit(page, "en-cli-sign-in");
      // The card's own checks: nothing is posted without both fields.
      await page.getByRole("button", { name: "Sign in", exact: true }).click();
      await page.getByText("Enter your user name.").waitFor();
      await page.getByText("Enter your password.").waitFor();
      assert.match(page.url(), /\/oidc\/login\?ticket=/, "not posted");
      assert.equal(await page.getByLabel("User name").getAttribute("maxlength"), "63");
      assert.equal(await page.getByLabel("Password", { exact: true }).getAttribute("maxlength"), "128");
    });

    await test("ichor auth login: a wrong password and an unknown user get the SPA's one refusal", async () => {
      const refusals = [];
      for (const user of ["admin", "nobody-at-all"]) {
        await page.getByLabel("User name").fill(` ${user} `);
        await page.getByLabel("Password", { exact: true }).fill("wrong-password-123");
        await Promise.all([page.waitForEvent("load"), page.getByRole("button", { name: "Sign in", exact: true }).click()]);
        refusals.push(await alertText(page));
        assert.equal(await page.getByLabel("User name").inputValue(), user, "the name kept, trimmed as the SPA sends it");
        assert.equal(await page.getByLabel("Password", { exact: true }).inputValue(), "", "the password is not echoed");
        assert.ok((await page.getByTestId("sign-in-purpose").textContent()).includes(`port ${port}`));
      }
      assert.deepEqual(refusals, ["The user name or password is incorrect.", "The user name or password is incorrect."]);
      await audit(page, "en-cli-sign-in-error");
    });

    await test("ichor auth login: a user name that is markup comes back as text", async () => {
      const markup = "</script><img src=x onerror=alert(1)>";
      await page.getByLabel("User name").fill(markup);
      await page.getByLabel("Password", { exact: true }).fill("wrong-password-123");
      await Promise.all([page.waitForEvent("load"), page.getByRole("button", { name: "Sign in", exact: true }).click()]);
      assert.equal(await alertText(page), "The user name or password is incorrect.");
      assert.equal(await page.getByLabel("User name").inputValue(), markup);
      assert.equal(await page.locator("img").count(), 0);
      assert.deepEqual(dialogs, []);
    });

    await test("ichor auth login: the card in Japanese, by the browser's language and by the switch", async () => {
      await ja.page.goto(url);
      await ja.page.getByRole("heading", { name: "Ichor にサインイン" }).waitFor();
      assert.equal(await ja.page.evaluate(() => document.documentElement.lang), "ja");
      await ja.page.waitForFunction(() => document.title === "Ichor にサインイン");
      assert.equal(await ja.page.getByTestId("sign-in-purpose").textContent(),
        `このコンピューターのポート ${port} で待っている ichor CLI（kubectl、クライアント ichor-cli）をサインインします。` +
        "ichor auth login または kubectl を実行して、このポート番号が表示された場合にのみ続けてください。");
      await ja.page.getByRole("button", { name: "サインイン", exact: true }).click();
      await ja.page.getByText("ユーザー名を入力してください。").waitFor();
      await ja.page.getByLabel("ユーザー名").fill("nobody-at-all");
      await ja.page.getByLabel("パスワード", { exact: true }).fill("wrong-password-123");
      await Promise.all([ja.page.waitForEvent("load"), ja.page.getByRole("button", { name: "サインイン", exact: true }).click()]);
      assert.equal(await alertText(ja.page), "ユーザー名またはパスワードが正しくありません。");
      await audit(ja.page, "ja-cli-sign-in-error");
      // The English browser's switch: the page, its refusal and whom it is for, in Japanese.
      await page.getByLabel("Language").selectOption("ja");
      await page.getByRole("heading", { name: "Ichor にサインイン" }).waitFor();
      assert.equal(await alertText(page), "ユーザー名またはパスワードが正しくありません。");
      assert.ok((await page.getByTestId("sign-in-purpose").textContent()).includes(`ポート ${port} で待っている`));
      // The choice is the SPA's: remembered for the next page of this origin, then set back.
      await page.goto(url);
      await page.getByRole("heading", { name: "Ichor にサインイン" }).waitFor();
      await page.getByLabel("言語").selectOption("en");
      await page.getByRole("heading", { name: "Sign in to Ichor" }).waitFor();
    });

    await test("ichor auth login: the right password ends at the CLI's callback and the CLI stores the login", async () => {
      await page.getByLabel("User name").fill("admin");
      await page.getByLabel("Password", { exact: true }).fill(adminPassword);
      await Promise.all([
        page.waitForURL(new RegExp(`^http://127\\.0\\.0\\.1:${port}/callback\\?`), { timeout: 20_000 }),
        page.getByRole("button", { name: "Sign in", exact: true }).click(),
      ]);
      await page.getByText("Signed in, you can close this tab").waitFor();
      const { code, stderr } = await login.exit;
      signedIn = true;
      assert.equal(code, 0, stderr);
      assert.match(stderr, /Signed in to \S+ as admin /);
    });
  } finally {
    if (!signedIn) login.child.kill("SIGTERM");
    await en.close();
    await ja.close();
    rmSync(home, { recursive: true, force: true });
  }
}

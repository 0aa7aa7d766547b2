// End-to-end tests of the web UI in headless Chromium (playwright-core, Debian's chromium)
// against a real `ichor dev` on a free port with a temporary state directory: the English flow
// here, then the Japanese one (ja.mjs), the keyboard-only one (keyboard.mjs), `ichor auth login`'s
// sign-in page (cli-login.mjs), the second sign-in step (second-factor.mjs), the account page's
// sign-in methods (factors.mjs), passkeys with Chromium's virtual authenticator against an
// `ichor dev --localhost` (passkeys.mjs) and the session rules
// against a second issuer with 1-minute tokens (session.mjs). Every page is checked with axe-core
// and for layout at 1280×800 and 390×844 (checks.mjs), which writes axe-summary.md beside the
// screenshots.
//
// Env: ICHOR_BIN (the ichor binary), SCREENSHOT_DIR (output), and optionally UI_DIST (a built UI
// directory, passed as ICHOR_UI_DIR; without it the UI embedded in the binary is tested).
// Prints one line per test and a closing `ui: N passed, M failed`; exits 1 on any failure.

import { readFileSync, rmSync } from "node:fs";
import assert from "node:assert/strict";
import {
  KUBE_API_SERVER, changePassword, cspViolations, execBlock, launch, signIn, startDev, tally, test, testClusterCa, watchCsp,
} from "./harness.mjs";
import { audit, writeSummary } from "./checks.mjs";
import { cliLogin } from "./cli-login.mjs";
import { externalProvider } from "./external.mjs";
import { japanese } from "./ja.mjs";
import { keyboard } from "./keyboard.mjs";
import { sessionRules } from "./session.mjs";
import { secondFactor } from "./second-factor.mjs";
import { factors } from "./factors.mjs";
import { passkeyNeedsDomain, passkeys } from "./passkeys.mjs";

assert.ok(process.env.ICHOR_BIN, "set ICHOR_BIN");

const clusterCa = testClusterCa();
const dev = await startDev(["--kube-api-server", KUBE_API_SERVER, "--kube-ca-file", clusterCa.file]);
const base = dev.base;
const browser = await launch(dev.ca);
const { context, home } = browser;
console.log(home ? "CA trusted through an NSS database (certutil)" : "certutil failed: using ignoreHTTPSErrors");
watchCsp(context);

const ADMIN_NEW = "admin-correct-horse-battery";
const OP_NEW = "olga-correct-horse-battery";
let page = browser.page;
let operatorPassword = "";
let savedRefresh = "";

try {
  await test("the first admin signs in and is forced to change the password", async () => {
    await page.goto(base);
    await page.getByRole("heading", { name: "Sign in to Ichor" }).waitFor();
    assert.equal(await page.evaluate(() => document.documentElement.lang), "en");
    await audit(page, "en-sign-in");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByText("Enter your user name.").waitFor();
    await page.getByText("Enter your password.").waitFor();
    await signIn(page, "admin", "wrong-password-123");
    await page.getByText("The user name or password is incorrect.").waitFor();
    await audit(page, "en-sign-in-error");
    assert.equal(await page.getByLabel("User name").inputValue(), "admin", "the user name is kept");
    await page.getByLabel("Password", { exact: true }).fill(dev.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "Choose a new password" }).waitFor();
    assert.equal(await page.getByRole("link", { name: "Users" }).count(), 0, "only the change form");
    await audit(page, "en-must-change");
    await page.getByLabel("Current password").fill(dev.password);
    await page.getByLabel("New password", { exact: true }).fill("short");
    await page.getByRole("button", { name: "Change password" }).click();
    await page.getByText("Use at least 12 characters.").waitFor();
    await audit(page, "en-must-change-error");
    assert.equal(await page.getByLabel("Current password").inputValue(), dev.password, "nothing lost");
    await changePassword(page, dev.password, ADMIN_NEW);
    await page.getByRole("heading", { name: "Account" }).waitFor({ timeout: 20_000 });
    await page.getByText("Signed in as admin").first().waitFor();
    // The session's start and end, as English writes dates ("Dec 3, 2026, 1:05 PM").
    assert.match(await page.getByTestId("session-times").textContent(),
      /^Signed in since [A-Z][a-z]{2} \d{1,2}, \d{4}, \d{1,2}:\d{2}\s?[AP]M\. This session ends by .+ at the latest\.$/);
    await audit(page, "en-account");
  });

  // ichor dev runs with --kube-api-server and --kube-ca-file: GetMyKubeconfig serves a file.
  await test("the downloaded kubeconfig runs ichor auth token for the cluster and holds no secret", async () => {
    const [download] = await Promise.all([
      page.waitForEvent("download", { timeout: 15_000 }),
      page.getByRole("main").getByRole("button", { name: "Download my kubeconfig" }).click(),
    ]);
    assert.equal(download.suggestedFilename(), "kubeconfig-admin.yaml");
    const yaml = readFileSync(await download.path(), "utf8");
    await page.getByRole("main").getByText("Kubeconfig downloaded.").waitFor();
    const exec = execBlock(yaml);
    assert.equal(exec.apiVersion, "client.authentication.k8s.io/v1");
    assert.equal(exec.command, "ichor");
    assert.deepEqual(exec.args,
      ["auth", "token", "--issuer", base, "--client-id", "ichor-cli", "--audience", "ichor-kube"]);
    assert.equal(exec.interactiveMode, "IfAvailable");
    const servers = [...yaml.matchAll(/^\s*server:\s*['"]?([^'"\s]+)['"]?\s*$/gm)].map((m) => m[1]);
    assert.deepEqual(servers, [KUBE_API_SERVER], "the server is --kube-api-server");
    const caData = yaml.match(/^\s*certificate-authority-data:\s*['"]?([A-Za-z0-9+/=]+)['"]?\s*$/m)?.[1];
    assert.equal(caData, readFileSync(clusterCa.file).toString("base64"), "the CA is --kube-ca-file");
    // No credential of any kind: only the exec plugin obtains tokens.
    assert.doesNotMatch(yaml, /^\s*(token|tokenFile|id-token|refresh-token|client-key-data|client-certificate-data|client-key|username|password|auth-provider):/m);
    assert.doesNotMatch(yaml, /eyJ[A-Za-z0-9_-]{8,}/, "no JWT");
    assert.doesNotMatch(yaml, /PRIVATE KEY/);
    const { idToken, refreshToken } = await page.evaluate(() => ({
      idToken: sessionStorage.getItem("ichor.token"),
      refreshToken: JSON.parse(sessionStorage.getItem("ichor.refresh")).refreshToken,
    }));
    assert.ok(!yaml.includes(idToken) && !yaml.includes(refreshToken), "not the session's tokens");
  });

  await test("the admin creates an operator and sees its generated password once", async () => {
    await page.getByRole("link", { name: "Users" }).click();
    await page.getByRole("heading", { name: "Users" }).waitFor();
    const form = page.getByRole("form", { name: "Create user" });
    await form.getByLabel("Name", { exact: true }).fill("Bad_Name");
    await form.getByLabel("E-mail").fill("not-an-address");
    await form.getByRole("button", { name: "Create" }).click();
    await form.getByText("Use a lower-case DNS label").waitFor();
    await form.getByText("Enter an e-mail address").waitFor();
    assert.equal(await form.getByLabel("Name", { exact: true }).inputValue(), "Bad_Name", "nothing lost");
    await form.getByLabel("Name", { exact: true }).fill("olga");
    await form.getByLabel("Display name").fill("Olga Operator");
    await form.getByLabel("E-mail").fill("olga@example.com");
    await form.getByLabel("viewer").uncheck();
    await form.getByLabel("operator").check();
    await form.getByRole("button", { name: "Create" }).click();
    operatorPassword = (await page.getByTestId("generated-password").textContent()).trim();
    assert.ok(operatorPassword.length >= 12);
    await page.locator('tr[data-user="olga"]').getByRole("cell", { name: "operator", exact: true }).waitFor();
    await page.getByTestId("user-count").getByText("2 users").waitFor();
    await audit(page, "en-users-admin");
  });

  await test("the server's refusal is shown: the admin cannot delete the last admin", async () => {
    const row = page.locator('tr[data-user="admin"]');
    await row.getByRole("button", { name: "Delete" }).click();
    await row.getByText("Delete admin? This cannot be undone.").waitFor();
    await audit(page, "en-users-confirm");
    await row.getByRole("button", { name: "Confirm" }).click();
    await row.getByText('Refused: admin is the last enabled admin and cannot be disabled, demoted or deleted. ' +
      "Make another user an enabled admin first.").waitFor();
    await audit(page, "en-users-refused");
    await page.locator('tr[data-user="admin"]').waitFor();
  });

  await test("the admin edits roles, disables and enables a user and resets a password", async () => {
    const row = page.locator('tr[data-user="olga"]');
    await row.getByRole("button", { name: "Edit roles" }).click();
    await row.getByLabel("viewer").check();
    await row.getByRole("button", { name: "Save" }).click();
    await row.getByRole("cell", { name: "operator, viewer", exact: true }).waitFor();
    await row.getByRole("button", { name: "Edit roles" }).click();
    await row.getByLabel("viewer").uncheck();
    await row.getByRole("button", { name: "Save" }).click();
    await row.getByRole("cell", { name: "operator", exact: true }).waitFor();
    await row.getByRole("button", { name: "Disable", exact: true }).click();
    await row.getByText("disabled, must change password").waitFor();
    await row.getByRole("button", { name: "Enable", exact: true }).click();
    await row.getByText("active, must change password").waitFor();
    await page.getByRole("button", { name: "Dismiss" }).click();
    assert.equal(await page.getByTestId("generated-password").count(), 0, "the password was shown once");
    await row.getByRole("button", { name: "Reset password" }).click();
    await page.getByTestId("generated-password").waitFor();
    const reset = (await page.getByTestId("generated-password").textContent()).trim();
    assert.ok(reset.length >= 12 && reset !== operatorPassword, "a new generated password is shown");
    operatorPassword = reset;
  });

  await test("signing out revokes the refresh token's family", async () => {
    savedRefresh = await page.evaluate(() => JSON.parse(sessionStorage.getItem("ichor.refresh")).refreshToken);
    await page.getByRole("button", { name: "Account menu" }).click();
    await audit(page, "en-account-menu");
    await page.getByRole("menuitem", { name: "Sign out", exact: true }).click();
    await page.getByRole("heading", { name: "Sign in to Ichor" }).waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem("ichor.token")), null);
    const answer = await page.evaluate(async (rt) => {
      const r = await fetch("/oidc/token", {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ grant_type: "refresh_token", refresh_token: rt, client_id: "ichor-ui" }),
      });
      return { status: r.status, body: await r.json() };
    }, savedRefresh);
    assert.equal(answer.status, 400);
    assert.equal(answer.body.error, "invalid_grant");
  });

  await test("the operator signs in, changes the password and cannot see admin actions", async () => {
    await signIn(page, "olga", operatorPassword);
    await page.getByRole("heading", { name: "Choose a new password" }).waitFor();
    await changePassword(page, operatorPassword, OP_NEW);
    await page.getByRole("heading", { name: "Account" }).waitFor({ timeout: 20_000 });
    assert.equal(await page.getByRole("link", { name: "Users" }).count(), 0, "no Users page for an operator");
    await page.goto(`${base}/users`);
    await page.getByRole("heading", { name: "Account" }).waitFor();
    assert.equal(await page.getByRole("heading", { name: "Users" }).count(), 0);
    for (const name of ["Delete", "Disable", "Reset password", "Revoke sessions", "Edit roles", "Create"]) {
      assert.equal(await page.getByRole("button", { name, exact: true }).count(), 0, `no ${name} button`);
    }
    await page.getByText("Roles: operator").first().waitFor();
    // The API agrees: ListUsers is refused for the operator.
    const refused = await page.evaluate(async () => {
      const r = await fetch("/ichor.v1alpha1.UserService/ListUsers", {
        method: "POST",
        headers: { "content-type": "application/grpc-web+proto", "x-grpc-web": "1",
          authorization: `Bearer ${sessionStorage.getItem("ichor.token")}` },
        body: new Uint8Array([0, 0, 0, 0, 0]),
      });
      return r.headers.get("grpc-status") ?? (await r.text()).match(/grpc-status:(\d+)/)?.[1];
    });
    assert.equal(refused, "7", "PERMISSION_DENIED");
    await audit(page, "en-account-operator");
  });

  await test("a duplicated tab does not sign the original out", async () => {
    const before = await page.evaluate(() => sessionStorage.getItem("ichor.refresh"));
    const [copy] = await Promise.all([context.waitForEvent("page"), page.evaluate(() => void window.open(location.href))]);
    await copy.getByRole("heading", { name: "Sign in to Ichor" }).waitFor({ timeout: 15_000 });
    assert.equal(await copy.evaluate(() => sessionStorage.getItem("ichor.refresh")), null, "the copy dropped the tokens");
    await copy.close();
    assert.equal(await page.evaluate(() => sessionStorage.getItem("ichor.refresh")), before);
    await page.reload();
    await page.getByText("Roles: operator").first().waitFor();
  });

  await test("an expired ID token is renewed through the refresh token", async () => {
    const rotatedBefore = await page.evaluate(() => sessionStorage.getItem("ichor.refresh"));
    // Make the stored token look expired: the tab must refresh before its first call.
    await page.evaluate(() => {
      const [h, p, s] = sessionStorage.getItem("ichor.token").split(".");
      const claims = JSON.parse(atob(p.replace(/-/g, "+").replace(/_/g, "/")));
      claims.exp = Math.floor(Date.now() / 1000) - 10;
      const enc = btoa(JSON.stringify(claims)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
      sessionStorage.setItem("ichor.token", `${h}.${enc}.${s}`);
    });
    await page.reload();
    await page.getByText("Roles: operator").first().waitFor();
    const after = await page.evaluate(() => sessionStorage.getItem("ichor.token"));
    const exp = JSON.parse(atob(after.split(".")[1].replace(/-/g, "+").replace(/_/g, "/"))).exp;
    assert.ok(exp * 1000 > Date.now() + 60_000, "a fresh ID token");
    const rotatedAfter = await page.evaluate(() => sessionStorage.getItem("ichor.refresh"));
    assert.notEqual(rotatedAfter, rotatedBefore, "the refresh token was rotated");
  });

  await test("a token the API refuses (401) is refreshed once and the call retried", async () => {
    const rotatedBefore = await page.evaluate(() => sessionStorage.getItem("ichor.refresh"));
    // Keep the claims (far from expiry) but break the signature: only the server notices.
    await page.evaluate(() => {
      const [h, p] = sessionStorage.getItem("ichor.token").split(".");
      sessionStorage.setItem("ichor.token", `${h}.${p}.AAAA`);
    });
    await page.reload();
    await page.getByText("Roles: operator").first().waitFor();
    const after = await page.evaluate(() => sessionStorage.getItem("ichor.token"));
    assert.ok(!after.endsWith(".AAAA"), "the broken token was replaced");
    const rotatedAfter = await page.evaluate(() => sessionStorage.getItem("ichor.refresh"));
    assert.notEqual(rotatedAfter, rotatedBefore, "the refresh token was rotated");
  });
  await test("sign out everywhere ends the family and shows the sign-in card", async () => {
    await page.getByRole("button", { name: "Account menu" }).click();
    assert.equal(await page.getByRole("menuitem", { name: "Sign out everywhere" }).count(), 0,
      "not offered to an operator (RevokeSessions is an admin's)");
    await page.getByRole("menuitem", { name: "Sign out", exact: true }).click();
    await page.getByRole("heading", { name: "Sign in to Ichor" }).waitFor();
    await signIn(page, "admin", ADMIN_NEW);
    await page.getByRole("button", { name: "Account menu" }).waitFor();
    const rt = await page.evaluate(() => JSON.parse(sessionStorage.getItem("ichor.refresh")).refreshToken);
    await page.getByRole("button", { name: "Account menu" }).click();
    await page.getByRole("menuitem", { name: "Sign out everywhere" }).click();
    await page.getByRole("heading", { name: "Sign in to Ichor" }).waitFor();
    const status = await page.evaluate(async (t) => (await fetch("/oidc/token", {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: "refresh_token", refresh_token: t, client_id: "ichor-ui" }),
    })).status, rt);
    assert.equal(status, 400);
  });

  await japanese({ dev, adminPassword: ADMIN_NEW });
  await keyboard({ dev, adminPassword: ADMIN_NEW, page });
  await cliLogin({ dev, adminPassword: ADMIN_NEW });
  await secondFactor({ dev, user: "olga", password: OP_NEW, adminPassword: ADMIN_NEW });
  // This issuer is named by an IP address: adding a passkey is refused, with the reason.
  await passkeyNeedsDomain({ dev, user: "admin", password: ADMIN_NEW });
  // Last on this issuer: the admin gets (and loses again) a second factor.
  await factors({ dev, user: "admin", password: ADMIN_NEW });
} finally {
  await browser.close();
  rmSync(clusterCa.dir, { recursive: true, force: true });
}
if (tally().failed) console.log(`ichor dev stderr (tail):\n${dev.stderr().split("\n").slice(-20).join("\n")}`);
await dev.cleanup();

await passkeys();
await sessionRules({ adminPassword: ADMIN_NEW });
await externalProvider();

await test("no Content-Security-Policy violation was reported in any tab", async () => {
  assert.deepEqual(cspViolations(), []);
});

writeSummary();
const { passed, failed, known } = tally();
if (known.length) console.log(`ui: ${known.length} known bug(s) not counted: ${known.join("; ")}`);
console.log(`ui: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);

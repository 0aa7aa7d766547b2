// The site's own identity provider beside Ichor's users, in the browser: both sign-ins on one card,
// an external user's account page and kubeconfig. Checked with axe and for layout like every page.

import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import assert from "node:assert/strict";
import {
  KUBE_API_SERVER, execBlock, freePortPair, launch, startDev, test, testClusterCa, watchCsp,
} from "./harness.mjs";
import { audit } from "./checks.mjs";

// The provider: panva's OpenID-certified oidc-provider (hack/conformance/oidc-provider), on HTTPS
// under a CA of its own.
const IDP_DIR = new URL("../../hack/conformance/oidc-provider/", import.meta.url).pathname;

/** A CA and a serving certificate for 127.0.0.1 (openssl): `{ dir, ca, cert, key }`. */
function idpPki() {
  const dir = mkdtempSync(join(tmpdir(), "ichor-ui-idp-"));
  const f = (n) => join(dir, n);
  const run = (args) => execFileSync("openssl", args, { stdio: "ignore" });
  run(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", f("ca.key"),
    "-out", f("ca.crt"), "-days", "1", "-subj", "/CN=ichor-e2e-idp-ca"]);
  run(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", f("key.pem"),
    "-out", f("leaf.csr"), "-subj", "/CN=ichor-e2e-idp"]);
  writeFileSync(f("ext.cnf"), "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n");
  run(["x509", "-req", "-in", f("leaf.csr"), "-CA", f("ca.crt"), "-CAkey", f("ca.key"), "-CAcreateserial",
    "-out", f("cert.pem"), "-days", "1", "-extfile", f("ext.cnf")]);
  return { dir, ca: f("ca.crt"), cert: f("cert.pem"), key: f("key.pem") };
}

/** Starts the provider with `accounts` and the UI's client at `redirect`; waits for its ready line. */
async function startIdp(pki, accounts, redirect) {
  const port = await freePortPair();
  const issuer = `https://127.0.0.1:${port}`;
  const child = spawn(process.execPath, [join(IDP_DIR, "server.mjs"), "serve", "--issuer", issuer,
    "--cert", pki.cert, "--key", pki.key, "--accounts", JSON.stringify(accounts),
    "--clients", JSON.stringify([{ client_id: "ichor-ui", redirect_uris: [redirect] }])],
  { stdio: ["ignore", "pipe", "pipe"] });
  let err = "";
  child.stderr.on("data", (d) => (err += d));
  await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`the provider was not ready in 30 s:\n${err}`)), 30_000);
    child.stdout.on("data", (d) => { if (String(d).includes("ready")) { clearTimeout(t); resolve(); } });
    child.once("exit", (code) => reject(new Error(`the provider exited ${code}:\n${err}`)));
  });
  return { child, issuer, stderr: () => err };
}

/** The identity-provider tests, with their own provider and `ichor dev`. */
export async function externalProvider() {
  let idp = null;
  let extDev = null;
  let ext = null;
  const extPki = idpPki();
  const extClusterCa = testClusterCa();
  try {
    const devPort = await freePortPair();
    const extBase = `https://127.0.0.1:${devPort}`;
    idp = await startIdp(extPki, { carol: { email: "carol@example.org", groups: ["dev"], name: "Carol Example" } },
      `${extBase}/auth/callback`);
    // RBAC alone: carol (no Ichor role) is a viewer by a binding of her prefixed name.
    writeFileSync(join(extPki.dir, "rbac.yaml"), [
      "apiVersion: rbac.authorization.k8s.io/v1", "kind: ClusterRoleBinding", "metadata:", "  name: carol-viewer",
      "roleRef:", "  apiGroup: rbac.authorization.k8s.io", "  kind: ClusterRole", "  name: ichor-viewer",
      "subjects:", "  - apiGroup: rbac.authorization.k8s.io", "    kind: User", "    name: oidc:carol@example.org", ""].join("\n"));
    extDev = await startDev(["--kube-api-server", KUBE_API_SERVER, "--kube-ca-file", extClusterCa.file,
      "--external-issuer-url", idp.issuer, "--external-client-id", "ichor-ui", "--external-kube-client-id", "kubernetes",
      "--external-ca-file", extPki.ca, "--rbac-file", join(extPki.dir, "rbac.yaml")], devPort);
    ext = await launch([extDev.ca, extPki.ca]);
    const extCsp = [];
    ext.context.on("console", (m) => { if (/Content Security Policy/i.test(m.text())) extCsp.push(m.text()); });
    watchCsp(ext.context);
    const p = ext.page;

    await test("with an identity provider configured, both sign-ins are on one card", async () => {
      await p.goto(extBase);
      await p.getByRole("heading", { name: "Sign in to Ichor" }).waitFor();
      await p.getByRole("button", { name: "Sign in with your identity provider" }).waitFor();
      assert.equal(await p.getByRole("button", { name: "Sign in", exact: true }).count(), 1, "the password sign-in");
      assert.equal(await p.getByRole("separator").count(), 1, "one separator between them");
      assert.equal(await p.locator("form.card").count(), 1, "one card");
      await audit(p, "en-sign-in-with-identity-provider");
    });

    await test("a provider the cluster's API server trusts differently is warned about on the card", async () => {
      // The server's own answer, with the key an issuer following a mismatching TalosCluster adds
      // (ichor dev follows no TalosCluster; the comparison is tested in issuer/tests/it/cluster).
      const doc = await p.evaluate(() => fetch("/auth/config").then((r) => r.json()));
      assert.equal(doc.providers.length, 2, "the server names both providers");
      doc.externalTrust = { status: "differs", reason: "the cluster's username prefix is \"corp:\", Ichor's API uses \"oidc:\"" };
      await p.route("**/auth/config", (route) => route.fulfill({ json: doc }));
      await p.reload();
      const warning = p.getByTestId("trust-warning");
      await warning.waitFor();
      assert.match(await warning.innerText(), /does not trust this identity provider as Ichor does/);
      await audit(p, "en-sign-in-provider-mismatch");
      await p.unroute("**/auth/config");
      await p.reload();
      await p.getByRole("button", { name: "Sign in with your identity provider" }).waitFor();
      assert.equal(await p.getByTestId("trust-warning").count(), 0, "no warning without a mismatch");
    });

    await test("an external user signs in at the provider (PKCE redirect) and sees the account page", async () => {
      let asked = null;
      p.on("request", (r) => {
        const u = new URL(r.url());
        if (!asked && u.origin === new URL(idp.issuer).origin && u.searchParams.has("response_type")) asked = u;
      });
      await p.getByRole("button", { name: "Sign in with your identity provider" }).click();
      await p.getByRole("button", { name: "carol" }).click({ timeout: 20_000 });
      await p.waitForURL((u) => u.origin === extBase, { timeout: 20_000 });
      // Back in the app, signed in; a reload keeps the tab's session.
      await p.getByRole("heading", { name: "Account" }).waitFor({ timeout: 20_000 });
      await p.goto(`${extBase}/account`);
      await p.getByRole("heading", { name: "Account" }).waitFor({ timeout: 20_000 });
      const main = p.getByRole("main");
      await main.getByText("Signed in as oidc:carol@example.org").waitFor();
      await main.getByText("carol@example.org", { exact: true }).waitFor();
      await main.getByTestId("external-password").waitFor();
      assert.equal(await p.getByLabel("Current password").count(), 0, "no password form for an external user");
      const { token, pending } = await p.evaluate(() => ({
        token: sessionStorage.getItem("ichor.token"),
        pending: sessionStorage.getItem("ichor.external.pending"),
      }));
      assert.equal(pending, null, "the pending request is used once and removed");
      const c = JSON.parse(atob(token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
      assert.equal(c.iss, idp.issuer, "the session's token is the provider's");
      assert.equal(c.aud, "ichor-ui");
      assert.equal(await p.evaluate(() => sessionStorage.getItem("ichor.refresh")), null, "no refresh token asked for");
      // The authorization request the SPA sent the browser with: the code flow with S256 PKCE.
      assert.ok(asked, "the browser went to the provider's authorization endpoint");
      assert.equal(asked.searchParams.get("response_type"), "code");
      assert.equal(asked.searchParams.get("code_challenge_method"), "S256");
      assert.ok((asked.searchParams.get("code_challenge") ?? "").length >= 43, "a challenge");
      assert.ok(asked.searchParams.get("state") && asked.searchParams.get("nonce"), "state and nonce");
      assert.equal(asked.searchParams.get("redirect_uri"), `${extBase}/auth/callback`);
      await audit(p, "en-account-external");
    });

    await test("an external user's kubeconfig signs in at the provider with the apiserver's client", async () => {
      const [download] = await Promise.all([
        p.waitForEvent("download", { timeout: 15_000 }),
        p.getByRole("main").getByRole("button", { name: "Download my kubeconfig" }).click(),
      ]);
      assert.equal(download.suggestedFilename(), "kubeconfig-oidc_carol@example.org.yaml");
      const yaml = readFileSync(await download.path(), "utf8");
      const exec = execBlock(yaml);
      assert.equal(exec.command, "ichor");
      assert.deepEqual(exec.args, ["auth", "token", "--issuer", idp.issuer, "--client-id", "kubernetes",
        "--audience", "kubernetes", "--scope", "openid offline_access email profile groups", "--prompt", "consent"]);
      assert.doesNotMatch(yaml, /eyJ[A-Za-z0-9_-]{8,}/, "no JWT");
      assert.deepEqual(extCsp, [], "no Content-Security-Policy violation");
    });
  } catch (e) {
    await test("the identity-provider block", () => { throw e; });
    if (idp) console.log(`provider stderr:\n${idp.stderr()}`);
  } finally {
    if (ext) await ext.close();
    if (extDev) await extDev.cleanup();
    if (idp) idp.child.kill("SIGTERM");
    rmSync(extPki.dir, { recursive: true, force: true });
    rmSync(extClusterCa.dir, { recursive: true, force: true });
  }
}

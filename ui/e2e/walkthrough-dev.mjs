// The walkthrough's browser step (walkthrough.mjs) against a real `ichor dev`, as a user runs it:
// the first admin signs in, changes the password and downloads the kubeconfig; run again with the
// spent first password, it fails at the sign-in step with a screenshot; for a host name mapped to
// the issuer's address whose certificate does not cover it, it fails at opening the page with
// Chromium's name-mismatch error (the name was resolved through the mapping, not DNS).
//
// Env: ICHOR_BIN (the ichor binary). Prints one line per check and `walkthrough: N passed, M
// failed`; exits 1 on any failure.

import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import assert from "node:assert/strict";
import { KUBE_API_SERVER, execBlock, startDev, tally, test, testClusterCa } from "./harness.mjs";

assert.ok(process.env.ICHOR_BIN, "set ICHOR_BIN");
const SCRIPT = new URL("./walkthrough.mjs", import.meta.url).pathname;

/** Runs walkthrough.mjs with `args`: `{ code, result (its JSON line), stderr }`. */
function walkthrough(args) {
  return new Promise((resolve) => {
    execFile(process.execPath, [SCRIPT, ...args], { timeout: 120_000 }, (err, stdout, stderr) => {
      const last = stdout.trim().split("\n").pop() ?? "";
      let result = null;
      try {
        result = JSON.parse(last);
      } catch {
        result = { unparsed: stdout };
      }
      resolve({ code: err ? (err.code ?? 1) : 0, result, stderr });
    });
  });
}

const clusterCa = testClusterCa();
const out = mkdtempSync(join(tmpdir(), "ichor-walkthrough-dev-"));
const dev = await startDev(["--kube-api-server", KUBE_API_SERVER, "--kube-ca-file", clusterCa.file]);
const NEW = "walkthrough-correct-horse-battery";
const creds = (first, file) => ["--ca", dev.ca, "--user", "admin", "--first-password", first,
  "--new-password", NEW, "--out", join(out, file)];

try {
  await test("walkthrough.mjs signs the first admin in, changes the password, downloads the kubeconfig", async () => {
    const r = await walkthrough(["--url", dev.base, ...creds(dev.password, "admin.kubeconfig")]);
    assert.equal(r.code, 0, `exit 0: ${r.stderr}`);
    assert.equal(r.result.ok, true);
    assert.deepEqual(Object.keys(r.result.steps), ["launch", "open", "sign-in", "change-password", "download"]);
    assert.ok(Object.values(r.result.steps).every((ms) => Number.isInteger(ms) && ms >= 0), "durations in ms");
    const exec = execBlock(readFileSync(join(out, "admin.kubeconfig"), "utf8"));
    assert.equal(exec.command, "ichor");
    assert.deepEqual(exec.args,
      ["auth", "token", "--issuer", dev.base, "--client-id", "ichor-cli", "--audience", "ichor-kube"]);
    console.log(`      ${JSON.stringify(r.result.steps)} (${r.result.totalMs} ms)`);
  });

  await test("walkthrough.mjs fails at the sign-in step with the spent first password, with a screenshot", async () => {
    const r = await walkthrough(["--url", dev.base, ...creds(dev.password, "again.kubeconfig")]);
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.result.failedStep, "sign-in");
    assert.match(r.result.error, /The user name or password is incorrect/);
    assert.match(r.stderr, /step "sign-in" failed/);
    assert.equal(r.result.screenshot, join(out, "again.kubeconfig.failure.png"));
    assert.ok(existsSync(r.result.screenshot), "the screenshot is written");
    assert.ok(!existsSync(join(out, "again.kubeconfig")), "no kubeconfig");
  });

  await test("walkthrough.mjs resolves the host name through --address, and checks its certificate", async () => {
    const r = await walkthrough(["--url", `https://ichor.walkthrough.test:${dev.port}`, "--address", "127.0.0.1",
      ...creds(NEW, "named.kubeconfig")]);
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.result.failedStep, "open");
    // Reached ichor dev (its certificate names 127.0.0.1 and localhost only): not a DNS failure.
    assert.match(r.result.error, /ERR_CERT_COMMON_NAME_INVALID/);
  });
} finally {
  await dev.cleanup();
  rmSync(clusterCa.dir, { recursive: true, force: true });
  rmSync(out, { recursive: true, force: true });
}

const { passed, failed } = tally();
console.log(`walkthrough: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);

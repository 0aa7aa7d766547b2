// The parts every browser test file shares: a real `ichor dev` on a free port with a temporary
// state directory (restartable on the same port and state), headless Chromium (Debian's, through
// playwright-core) trusting its CA, and the test runner's bookkeeping.

import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import assert from "node:assert/strict";
import { chromium } from "playwright-core";

const ICHOR = process.env.ICHOR_BIN;
const DIST = process.env.UI_DIST;

function portFree(port) {
  return new Promise((resolve) => {
    const s = createServer();
    s.once("error", () => resolve(false));
    s.listen(port, "127.0.0.1", () => s.close(() => resolve(true)));
  });
}

/** A free port whose next port is free too (ichor dev's internal listener takes it). */
export async function freePortPair() {
  for (let i = 0; i < 50; i++) {
    const p = 20000 + Math.floor(Math.random() * 40000);
    if ((await portFree(p)) && (await portFree(p + 1))) return p;
  }
  throw new Error("no free port pair");
}

/** Starts `ichor dev` on `port` with `stateDir`; resolves once it serves (its banner is printed). */
function spawnDev(port, stateDir, extra) {
  const env = { ...process.env, RUST_LOG: "warn" };
  if (DIST) env.ICHOR_UI_DIR = DIST;
  else delete env.ICHOR_UI_DIR;
  const child = spawn(ICHOR, ["dev", "--port", String(port), "--state-dir", stateDir, ...extra], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const log = { out: "", err: "" };
  child.stderr.on("data", (d) => (log.err += d));
  const ready = new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`ichor dev did not start in 60 s:\n${log.out}\n${log.err}`)), 60_000);
    child.stdout.on("data", (d) => {
      log.out += d;
      if (log.out.includes("Press Ctrl-C")) {
        clearTimeout(t);
        resolve(log.out.match(/Password:\s+(\S+)/)?.[1] ?? "");
      }
    });
    child.once("exit", (code) => reject(new Error(`ichor dev exited ${code}:\n${log.err}`)));
  });
  return { child, log, ready };
}

/**
 * A running `ichor dev`: `{ port, base, password, ca, stop(), start(), stderr(), cleanup() }`.
 * `stop` ends the process (SIGTERM, waits for its exit); `start` runs it again on the same port
 * and state, as an issuer restart does.
 */
export async function startDev(extra = [], chosenPort = null) {
  const port = chosenPort ?? (await freePortPair());
  const state = mkdtempSync(join(tmpdir(), "ichor-ui-e2e-"));
  const stateDir = join(state, "dev");
  let run = spawnDev(port, stateDir, extra);
  const password = await run.ready;
  const dev = {
    port,
    // `--localhost` names the issuer https://localhost:PORT (passkeys need a domain name).
    base: extra.includes("--localhost") ? `https://localhost:${port}` : `https://127.0.0.1:${port}`,
    password,
    state,
    ca: join(stateDir, "secrets", "ichor-oidc-tls", "ca.crt"),
    stderr: () => run.log.err,
    async stop() {
      if (run.child.exitCode !== null || run.child.signalCode !== null) return;
      const exited = new Promise((r) => run.child.once("exit", r));
      run.child.kill("SIGTERM");
      await exited;
    },
    async start() {
      run = spawnDev(port, stateDir, extra);
      await run.ready;
    },
    async cleanup() {
      await dev.stop().catch(() => {});
      rmSync(state, { recursive: true, force: true });
    },
  };
  return dev;
}

/** A HOME with an NSS database trusting the CA(s); null when certutil is unavailable. */
export function trustCa(ca) {
  const home = mkdtempSync(join(tmpdir(), "ichor-ui-home-"));
  const db = `sql:${join(home, ".pki", "nssdb")}`;
  try {
    mkdirSync(join(home, ".pki", "nssdb"), { recursive: true });
    execFileSync("certutil", ["-d", db, "-N", "--empty-password"], { stdio: "ignore" });
    for (const [i, file] of [ca].flat().entries()) {
      execFileSync("certutil", ["-d", db, "-A", "-t", "C,,", "-n", `ichor-test-ca-${i}`, "-i", file], { stdio: "ignore" });
    }
    return home;
  } catch {
    return null;
  }
}

/**
 * Chromium with its own profile, trusting `ca` through a fresh NSS database when possible, with
 * `locale` as the browser's language (navigator.languages). `{ context, page, home, close() }`.
 */
export async function launch(ca, locale = "en-US") {
  const home = trustCa(ca);
  const profile = mkdtempSync(join(tmpdir(), "ichor-ui-profile-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
      "--disable-sync", "--no-first-run", "--disable-quic", "--disable-dev-shm-usage", `--lang=${locale}`],
    env: { ...process.env, ...(home ? { HOME: home } : {}) },
    ignoreHTTPSErrors: !home,
    acceptDownloads: true,
    viewport: { width: 1280, height: 800 },
    locale,
  });
  const page = context.pages()[0] ?? (await context.newPage());
  return {
    context,
    page,
    home,
    profile,
    async close() {
      await context.close().catch(() => {});
      rmSync(profile, { recursive: true, force: true });
      if (home) rmSync(home, { recursive: true, force: true });
    },
  };
}

/** The API server a kubeconfig names in the tests (nothing listens there). */
export const KUBE_API_SERVER = "https://127.0.0.1:6443";

/** A self-signed CA certificate (PEM file) standing for a cluster's CA; `{ dir, file }`. */
export function testClusterCa() {
  const dir = mkdtempSync(join(tmpdir(), "ichor-ui-cluster-ca-"));
  const file = join(dir, "ca.crt");
  execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
    "-keyout", join(dir, "ca.key"), "-out", file, "-days", "1", "-subj", "/CN=ichor-e2e-cluster-ca"], { stdio: "ignore" });
  return { dir, file };
}

/** The `exec` block of a kubeconfig as rendered by the issuer (serde_yaml, block style). */
export function execBlock(yaml) {
  const lines = yaml.split("\n");
  const start = lines.findIndex((l) => /^\s*exec:\s*$/.test(l));
  assert.ok(start >= 0, "the kubeconfig has an exec block");
  const indent = (l) => l.match(/^ */)[0].length;
  const base = indent(lines[start]);
  const block = [];
  for (const l of lines.slice(start + 1)) {
    if (l.trim() === "" || indent(l) <= base) break;
    block.push(l);
  }
  const top = indent(block[0]);
  const exec = {};
  let list = null;
  for (const l of block) {
    const item = l.match(/^\s*- (.*)$/);
    if (item && list) { list.push(item[1].replace(/^['"]|['"]$/g, "")); continue; }
    if (indent(l) !== top) continue;
    const kv = l.trim().match(/^([A-Za-z]+):\s*(.*)$/);
    if (!kv) continue;
    if (kv[2] === "") { exec[kv[1]] = list = []; } else { exec[kv[1]] = kv[2].replace(/^['"]|['"]$/g, ""); list = null; }
  }
  return exec;
}

/** The `exp` claim of a JWT (seconds). */
export const jwtExp = (t) => JSON.parse(atob(t.split(".")[1].replace(/-/g, "+").replace(/_/g, "/"))).exp;

const results = [];
const knownFailures = [];

/** Runs one named test; prints `ok` or `FAIL` with the first lines of the error. */
export async function test(name, f) {
  try {
    await f();
    results.push([name, true]);
    console.log(`ok    ${name}`);
  } catch (e) {
    results.push([name, false]);
    console.log(`FAIL  ${name}\n      ${String(e?.stack ?? e).split("\n").slice(0, 6).join("\n      ")}`);
  }
}

/**
 * A test of behaviour a known bug breaks: its failure is printed as `known` and not counted;
 * when it passes it counts as passed, with a note to drop the marker.
 */
export async function knownBug(name, bug, f) {
  try {
    await f();
    results.push([name, true]);
    console.log(`ok    ${name}\n      (marked as a known bug but passed: drop knownBug(): ${bug})`);
  } catch (e) {
    knownFailures.push(name);
    console.log(`known ${name}\n      known bug: ${bug}\n      ${String(e?.message ?? e).split("\n")[0]}`);
  }
}

/** The tally: `{ passed, failed, known }`. */
export function tally() {
  const passed = results.filter(([, ok]) => ok).length;
  return { passed, failed: results.length - passed, known: [...knownFailures] };
}

/** Signs in on the English sign-in card. */
export async function signIn(page, user, password) {
  await page.getByLabel("User name").fill(user);
  await page.getByLabel("Password", { exact: true }).fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
}

/** Changes the password on the English form and waits for the reload that follows. */
export async function changePassword(page, current, next) {
  await page.getByLabel("Current password").fill(current);
  await page.getByLabel("New password", { exact: true }).fill(next);
  await page.getByLabel("Repeat the new password").fill(next);
  await Promise.all([
    page.waitForEvent("load", { timeout: 30_000 }),
    page.getByRole("button", { name: "Change password" }).click(),
  ]);
}

const csp = [];
/** Records the Content-Security-Policy violations the pages of `context` report. */
export function watchCsp(context) {
  context.on("console", (m) => { if (/Content Security Policy/i.test(m.text())) csp.push(m.text()); });
}
/** Every CSP violation recorded so far. */
export const cspViolations = () => [...csp];

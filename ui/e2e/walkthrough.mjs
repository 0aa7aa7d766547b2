// The walkthrough's browser step, as a newcomer does it: headless Chromium (Debian's, through
// playwright-core) opens the issuer's public URL, signs the first admin in with the printed
// password, meets the must-change form and sets the new password, signs in again when the UI asks,
// and downloads "my kubeconfig" through the UI's button. Only the UI is driven: the script makes
// no API call of its own.
//
// Usage (from anywhere; playwright-core is found in ui/node_modules beside this file):
//   node ui/e2e/walkthrough.mjs --url https://ichor.example.test:8443 --address 10.96.0.20 \
//     --ca site-ca.pem --user admin --first-password P1 --new-password P2 --out admin.kubeconfig
//
//   --url             the issuer's public URL, as the site publishes it
//   --address         the IP address the URL's host name resolves to (a Chromium host-resolver
//                     rule `MAP <host> <address>`: no DNS is asked); not needed (and not used)
//                     when the URL's host is an IP address
//   --ca              a PEM file of the CA certificate(s) that issued the public listener's
//                     certificate; trusted through a fresh NSS database (certutil), beside
//                     Chromium's own roots; certificate errors are never ignored
//   --user, --first-password, --new-password
//                     the first admin, the password printed for it, the password it chooses
//   --out             where the downloaded kubeconfig is written
//   --chromium        the browser (default /usr/bin/chromium)
//   --timeout-ms      how long one step may wait for the UI (default 60000)
//
// Exits 0 with the kubeconfig written; 2 on a usage error. On a failure, exits 1 with `walkthrough: step "<step>"
// failed: …` on stderr (with the alerts the page shows) and a screenshot at <out>.failure.png.
// Either way, the last line on stdout is one JSON object:
//   {"ok":true,"kubeconfig":"…","steps":{"launch":812,"open":640,…},"slowDowns":0,"totalMs":5123}
//   {"ok":false,"failedStep":"sign-in","error":"…","screenshot":"…","steps":{…},"slowDowns":0,"totalMs":…}
// Steps (durations in ms): launch, open, sign-in, change-password, sign-in-again (only when the UI
// asks), download. `slowDowns` counts the sign-ins the issuer told to wait ("Wait N seconds and try
// again": its per-source limit or a busy password check), which are waited out and repeated, up
// to two minutes in all, as a patient user does.

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { isIP } from "node:net";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { chromium } from "playwright-core";
import { trustCa } from "./harness.mjs";

const USAGE = "usage: node ui/e2e/walkthrough.mjs --url URL [--address IP] --ca PEM --user NAME " +
  "--first-password P --new-password P --out FILE [--chromium PATH] [--timeout-ms N]";

function options() {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        url: { type: "string" }, address: { type: "string" }, ca: { type: "string" }, user: { type: "string" },
        "first-password": { type: "string" }, "new-password": { type: "string" }, out: { type: "string" },
        chromium: { type: "string", default: "/usr/bin/chromium" }, "timeout-ms": { type: "string", default: "60000" },
      },
    }));
  } catch (e) {
    fail0(`${e.message}\n${USAGE}`);
  }
  for (const k of ["url", "ca", "user", "first-password", "new-password", "out"]) {
    if (!values[k]) fail0(`--${k} is required\n${USAGE}`);
  }
  let url;
  try {
    url = new URL(values.url);
  } catch {
    fail0(`--url ${values.url} is not a URL`);
  }
  if (url.protocol !== "https:") fail0(`--url ${values.url}: the issuer's public URL is https`);
  const host = url.hostname.replace(/^\[|\]$/g, "");
  if (!values.address && !isIP(host)) fail0(`--address is required: ${host} is a name and no DNS is asked`);
  if (values.address && !isIP(values.address)) fail0(`--address ${values.address} is not an IP address`);
  const timeout = Number(values["timeout-ms"]);
  if (!Number.isInteger(timeout) || timeout <= 0) fail0(`--timeout-ms ${values["timeout-ms"]} is not a positive integer`);
  return {
    url: url.origin, host, address: values.address, ca: values.ca, user: values.user,
    first: values["first-password"], next: values["new-password"], out: values.out,
    chromiumPath: values.chromium, timeout,
  };
}

/** A usage error, before any step ran. */
function fail0(message) {
  console.error(`walkthrough: ${message}`);
  console.log(JSON.stringify({ ok: false, failedStep: "arguments", error: message, steps: {}, totalMs: 0 }));
  process.exit(2);
}

/** Each certificate of a PEM file in a file of its own (certutil -A imports the first only). */
function splitPem(file, dir) {
  let pem;
  try {
    pem = readFileSync(file, "utf8");
  } catch (e) {
    throw new Error(`cannot read the CA file ${file}: ${e.message}`);
  }
  const certs = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (!certs.length) throw new Error(`the CA file ${file} holds no PEM certificate`);
  return certs.map((c, i) => {
    const f = join(dir, `ca-${i}.pem`);
    writeFileSync(f, `${c}\n`);
    return f;
  });
}

/** What the page's alerts say, when one of them ended a wait. */
class PageAlert extends Error {
  constructor(texts) {
    super(`the page says: ${texts.join(" | ")}`);
    this.texts = texts;
  }
}

/**
 * Waits until one of `outcomes` (name → locator) is visible and returns its name; an alert the
 * page shows first (a refused sign-in, a refused call) ends the wait with its text.
 */
async function first(page, outcomes, timeout) {
  const alert = page.getByRole("alert");
  const until = Date.now() + timeout;
  for (;;) {
    for (const [name, locator] of Object.entries(outcomes)) {
      if (await locator.first().isVisible().catch(() => false)) return name;
    }
    const alerts = (await alert.allInnerTexts().catch(() => [])).map((t) => t.trim()).filter(Boolean);
    if (alerts.length) throw new PageAlert(alerts);
    if (Date.now() > until) {
      throw new Error(`none of ${Object.keys(outcomes).join(", ")} appeared within ${timeout} ms (at ${page.url()})`);
    }
    await page.waitForTimeout(150);
  }
}

/** How long, in all, a sign-in waits out "wait N seconds" answers, as a patient user does. */
const SLOW_DOWN_BUDGET_MS = 120_000;

/**
 * Signs in on the sign-in card and returns which of `outcomes` follows; the issuer's "too many
 * attempts" (429) and "busy" (503) answers, which the card shows as "Wait N seconds and try
 * again", are waited out and the sign-in repeated, within [`SLOW_DOWN_BUDGET_MS`].
 */
async function signIn(page, password, outcomes, timeout) {
  const until = Date.now() + SLOW_DOWN_BUDGET_MS;
  for (;;) {
    await page.getByLabel("User name").fill(o.user);
    await page.getByLabel("Password", { exact: true }).fill(password);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    try {
      return await first(page, outcomes, timeout);
    } catch (e) {
      const wait = e instanceof PageAlert && e.texts.join(" ").match(/Wait (\d+) seconds and try again/);
      if (!wait || Date.now() + Number(wait[1]) * 1000 > until) throw e;
      slowDowns += 1;
      await page.waitForTimeout(Number(wait[1]) * 1000 + 500);
    }
  }
}

const o = options();
/** How many times a sign-in was told to wait. */
let slowDowns = 0;
const started = Date.now();
const steps = {};
let current = "launch";
let browser = null;
let page = null;
const scratch = mkdtempSync(join(tmpdir(), "ichor-walkthrough-"));
let home = null;
/** The requests that failed or were answered with an error, and the page's errors: for the failure message. */
const network = [];

/** Runs one step, recording its duration. */
async function step(name, f) {
  current = name;
  const t = Date.now();
  const r = await f();
  steps[name] = Date.now() - t;
  return r;
}

try {
  await step("launch", async () => {
    home = trustCa(splitPem(o.ca, scratch));
    if (!home) throw new Error(`certutil could not build an NSS database trusting ${o.ca} (is libnss3-tools installed?)`);
    const args = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
      "--disable-sync", "--no-first-run", "--disable-quic", "--disable-dev-shm-usage", "--lang=en-US",
      // Straight to the address: no proxy from the environment (the host-resolver rule would not
      // apply through one).
      "--no-proxy-server"];
    if (o.address && !isIP(o.host)) args.push(`--host-resolver-rules=MAP ${o.host} ${o.address}`);
    browser = await chromium.launchPersistentContext(join(scratch, "profile"), {
      executablePath: o.chromiumPath,
      headless: true,
      args,
      env: { ...process.env, HOME: home },
      acceptDownloads: true,
      viewport: { width: 1280, height: 800 },
      locale: "en-US",
      timeout: o.timeout,
    });
    browser.setDefaultTimeout(o.timeout);
    page = browser.pages()[0] ?? (await browser.newPage());
    page.on("requestfailed", (r) => network.push(`${r.method()} ${r.url()}: ${r.failure()?.errorText ?? "failed"}`));
    // "Failed to load resource" repeats what the response handler below records with the URL (or
    // is the browser's own /favicon.ico, which the issuer does not serve).
    page.on("console", (m) => {
      if (m.type() === "error" && !m.text().startsWith("Failed to load resource")) network.push(`console: ${m.text()}`);
    });
    page.on("pageerror", (err) => network.push(`page error: ${err.message}`));
    page.on("response", (r) => {
      if (r.status() >= 400) network.push(`${r.request().method()} ${r.url()}: HTTP ${r.status()}`);
    });
  });

  await step("open", async () => {
    // A certificate the CA did not issue, or a name it does not cover, fails here.
    await page.goto(o.url, { timeout: o.timeout });
    await first(page, { "sign-in card": page.getByRole("heading", { name: "Sign in to Ichor" }) }, o.timeout);
  });

  await step("sign-in", async () => {
    const seen = await signIn(page, o.first, {
      "must-change": page.getByRole("heading", { name: "Choose a new password" }),
      account: page.getByRole("heading", { name: "Account" }),
    }, o.timeout);
    if (seen !== "must-change") {
      throw new Error(`the first password led to the ${seen} page, not to the must-change form`);
    }
  });

  const afterChange = await step("change-password", async () => {
    await page.getByLabel("Current password").fill(o.first);
    await page.getByLabel("New password", { exact: true }).fill(o.next);
    await page.getByLabel("Repeat the new password").fill(o.next);
    await page.getByRole("button", { name: "Change password" }).click();
    // The UI says "Password changed. Signing you in again…", then reloads signed in.
    return first(page, {
      account: page.getByRole("heading", { name: "Account" }),
      "sign-in card": page.getByRole("heading", { name: "Sign in to Ichor" }),
    }, o.timeout);
  });

  if (afterChange === "sign-in card") {
    await step("sign-in-again", async () => {
      const seen = await signIn(page, o.next, {
        account: page.getByRole("heading", { name: "Account" }),
        "must-change": page.getByRole("heading", { name: "Choose a new password" }),
      }, o.timeout);
      if (seen !== "account") throw new Error("the new password led to the must-change form again");
    });
  }

  await step("download", async () => {
    const main = page.getByRole("main");
    const [download] = await Promise.all([
      page.waitForEvent("download", { timeout: o.timeout }),
      main.getByRole("button", { name: "Download my kubeconfig" }).click(),
    ]).catch(async (e) => {
      const alerts = (await page.getByRole("alert").allInnerTexts().catch(() => [])).filter(Boolean);
      throw alerts.length ? new Error(`the page says: ${alerts.join(" | ")}`) : e;
    });
    await download.saveAs(o.out);
    await first(page, { "the downloaded notice": main.getByText("Kubeconfig downloaded.") }, o.timeout);
    const yaml = readFileSync(o.out, "utf8");
    if (!/^\s*exec:\s*$/m.test(yaml) || !/^\s*server:/m.test(yaml)) {
      throw new Error(`${download.suggestedFilename()} (saved to ${o.out}) is not a kubeconfig with a server and an exec plugin`);
    }
  });

  await browser.close();
  browser = null;
  console.log(JSON.stringify({ ok: true, kubeconfig: o.out, steps, slowDowns, totalMs: Date.now() - started }));
} catch (e) {
  let message = String(e?.message ?? e).replace(/\u001b\[[0-9;]*m/g, "").split("\n").slice(0, 8).join("\n");
  if (network.length) message += `\nthe page's last errors: ${network.slice(-5).join("; ")}`;
  let screenshot = null;
  if (page) {
    screenshot = `${o.out}.failure.png`;
    await page.screenshot({ path: screenshot, fullPage: true, timeout: 10_000 }).catch((err) => {
      console.error(`walkthrough: no screenshot: ${err.message}`);
      screenshot = null;
    });
  }
  console.error(`walkthrough: step "${current}" failed: ${message}${page ? ` (page ${page.url()})` : ""}` +
    `${screenshot ? `; screenshot ${screenshot}` : ""}`);
  console.log(JSON.stringify({
    ok: false, failedStep: current, error: message, screenshot, steps, slowDowns, totalMs: Date.now() - started,
  }));
  process.exitCode = 1;
} finally {
  if (browser) await browser.close().catch(() => {});
  rmSync(scratch, { recursive: true, force: true });
  if (home) rmSync(home, { recursive: true, force: true });
}

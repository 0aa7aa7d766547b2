// The checks every page gets: axe-core (no serious or critical violation), the layout at each
// screen size (no horizontal scrolling, no control outside the viewport, no clipped button text)
// and a screenshot per size. The axe results are kept for a summary written at the end.

import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import assert from "node:assert/strict";

/** The screen sizes every page is checked and photographed at. */
export const SIZES = [[1280, 800], [390, 844]];
export const SHOTS = process.env.SCREENSHOT_DIR ?? "e2e-out";
mkdirSync(SHOTS, { recursive: true });

const AXE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");
const IMPACTS = ["critical", "serious", "moderate", "minor"];
/** page name → size → { impact: count, rules: [id …] } */
const summary = new Map();
const shots = [];

/** The layout problems of the page as shown: horizontal overflow, controls off screen, clipped text. */
function layoutProblems() {
  const W = window.innerWidth;
  const problems = [];
  const doc = document.documentElement;
  if (doc.scrollWidth > W) problems.push(`the page scrolls horizontally (${doc.scrollWidth} > ${W})`);
  const describe = (el) => `${el.tagName.toLowerCase()} "${(el.textContent || el.getAttribute("aria-label") || el.name || "").trim().slice(0, 40)}"`;
  for (const el of document.querySelectorAll("button, a[href], input, select, label, h1, h2, p, th, td, code, legend")) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (r.left < -0.5 || r.right > W + 0.5) problems.push(`${describe(el)} is outside the viewport (${Math.round(r.left)}..${Math.round(r.right)} of ${W})`);
    if (/^(BUTTON|A|SELECT)$/.test(el.tagName) && el.scrollWidth > el.clientWidth + 1) {
      problems.push(`${describe(el)} has clipped text (${el.scrollWidth} > ${el.clientWidth})`);
    }
  }
  return problems;
}

async function axe(page) {
  if (!(await page.evaluate(() => typeof window.axe === "object"))) {
    // Evaluated through the DevTools protocol, so the page's CSP (script-src 'self') is not
    // loosened for the test: the app runs under the same policy as in production.
    await page.evaluate(AXE);
  }
  return page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ["violations"] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length, help: v.help,
      targets: v.nodes.slice(0, 3).map((n) => n.target.join(" ")) }));
  });
}

/**
 * Checks the page at every size (axe, layout) and saves `<name>-<w>x<h>.png`; fails on a
 * serious or critical axe violation or a layout problem. The viewport is left at 1280×800.
 */
export async function audit(page, name) {
  const failures = [];
  const bySize = {};
  for (const [w, h] of SIZES) {
    await page.setViewportSize({ width: w, height: h });
    await page.waitForTimeout(100);
    const violations = await axe(page);
    const counts = Object.fromEntries(IMPACTS.map((i) => [i, 0]));
    for (const v of violations) counts[v.impact ?? "minor"] += v.nodes;
    bySize[`${w}x${h}`] = { ...counts, rules: violations.map((v) => `${v.id} (${v.impact})`) };
    for (const v of violations.filter((v) => v.impact === "serious" || v.impact === "critical")) {
      failures.push(`${w}x${h} axe ${v.impact} ${v.id}: ${v.help} at ${v.targets.join(", ")}`);
    }
    for (const p of await page.evaluate(layoutProblems)) failures.push(`${w}x${h} layout: ${p}`);
    const file = `${name}-${w}x${h}.png`;
    await page.screenshot({ path: join(SHOTS, file) });
    shots.push(file);
  }
  summary.set(name, bySize);
  await page.setViewportSize({ width: SIZES[0][0], height: SIZES[0][1] });
  assert.deepEqual(failures, [], `${name}: accessibility or layout problems`);
}

/** Writes `axe-summary.md` (violations per page and size, by impact) and the screenshot list. */
export function writeSummary() {
  const lines = ["| page | size | critical | serious | moderate | minor | rules |", "|---|---|---|---|---|---|---|"];
  for (const [name, bySize] of summary) {
    for (const [size, c] of Object.entries(bySize)) {
      lines.push(`| ${name} | ${size} | ${c.critical} | ${c.serious} | ${c.moderate} | ${c.minor} | ${c.rules.join(", ") || "none"} |`);
    }
  }
  const text = `# axe-core results (violating nodes by impact)\n\n${lines.join("\n")}\n\n# Screenshots\n\n${shots.map((s) => `- ${s}`).join("\n")}\n`;
  writeFileSync(join(SHOTS, "axe-summary.md"), text);
  const pages = summary.size;
  const total = [...summary.values()].flatMap((s) => Object.values(s)).reduce(
    (a, c) => IMPACTS.map((i, k) => a[k] + c[i]), [0, 0, 0, 0]);
  console.log(`axe: ${pages} pages × ${SIZES.length} sizes; violating nodes critical ${total[0]}, serious ${total[1]}, ` +
    `moderate ${total[2]}, minor ${total[3]}; ${shots.length} screenshots; summary in ${join(SHOTS, "axe-summary.md")}`);
}

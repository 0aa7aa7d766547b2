// The UI by keyboard alone: sign in, go to the Users page, open the account menu and sign out with
// Tab, typing and Enter only, each focused control showing a focus outline.

import assert from "node:assert/strict";
import { test } from "./harness.mjs";

/** The focused element: tag, accessible-ish name and whether a focus outline is drawn. */
function focused(page) {
  return page.evaluate(() => {
    const el = document.activeElement;
    if (!el || el === document.body) return { tag: "body", name: "", outline: false };
    const style = getComputedStyle(el);
    return {
      tag: el.tagName.toLowerCase(),
      role: el.getAttribute("role") ?? "",
      name: (el.getAttribute("aria-label") || el.textContent || el.getAttribute("name") || "").trim(),
      outline: style.outlineStyle !== "none" && parseFloat(style.outlineWidth) > 0,
    };
  });
}

/** Presses Tab until the focused element matches, at most 40 times; asserts its focus outline. */
async function tabTo(page, what, match) {
  for (let i = 0; i < 40; i++) {
    await page.keyboard.press("Tab");
    const f = await focused(page);
    if (match(f)) {
      assert.ok(f.outline, `${what} shows a focus outline`);
      return;
    }
  }
  throw new Error(`Tab never reached ${what}`);
}

/** The keyboard test on `page` (English) against run.mjs's issuer. */
export async function keyboard({ dev, adminPassword, page }) {
  await test("keyboard alone: sign in, open the Users page and the account menu, sign out (Tab and Enter)", async () => {
    await page.goto(dev.base);
    await page.getByRole("heading", { name: "Sign in to Ichor" }).waitFor();
    const start = await focused(page);
    assert.equal(start.name, "username", "the user name field has the focus on load");
    await page.keyboard.type("admin");
    await tabTo(page, "the password field", (f) => f.name === "password");
    await page.keyboard.type(adminPassword);
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "Account" }).waitFor({ timeout: 20_000 });
    await tabTo(page, "the Users link", (f) => f.tag === "a" && f.name === "Users");
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "Users" }).waitFor();
    await page.locator('tr[data-user="admin"]').waitFor();
    await tabTo(page, "the account menu", (f) => f.tag === "button" && f.name.startsWith("Account menu"));
    await page.keyboard.press("Enter");
    await page.getByRole("menuitem", { name: "Sign out", exact: true }).waitFor();
    await tabTo(page, "Sign out", (f) => f.role === "menuitem" && f.name === "Sign out");
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "Sign in to Ichor" }).waitFor();
  });
}

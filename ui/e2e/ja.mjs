// The UI in Japanese, against the `ichor dev` of run.mjs after its English tests (the admin's
// password is changed, the operator olga exists): a browser whose language is ja-JP, every page
// checked with axe and at both sizes, the server's refusals, the must-change screen, and the
// language switch.

import assert from "node:assert/strict";
import { launch, test, watchCsp } from "./harness.mjs";
import { audit } from "./checks.mjs";

async function signInJa(page, user, password) {
  await page.getByLabel("ユーザー名").fill(user);
  await page.getByLabel("パスワード", { exact: true }).fill(password);
  await page.getByRole("button", { name: "サインイン", exact: true }).click();
}

/** The Japanese tests; `dev` is run.mjs's issuer, `adminPassword` the admin's current password. */
export async function japanese({ dev, adminPassword }) {
  const b = await launch(dev.ca, "ja-JP");
  watchCsp(b.context);
  const page = b.page;
  let kenji = "";
  try {
    await test("ja: a browser in Japanese gets the Japanese sign-in card, its errors and <html lang=ja>", async () => {
      await page.goto(dev.base);
      await page.getByRole("heading", { name: "Ichor にサインイン" }).waitFor();
      assert.equal(await page.evaluate(() => document.documentElement.lang), "ja");
      assert.deepEqual(await page.evaluate(() => navigator.languages.slice(0, 1)), ["ja-JP"]);
      await audit(page, "ja-sign-in");
      await page.getByRole("button", { name: "サインイン", exact: true }).click();
      await page.getByText("ユーザー名を入力してください。").waitFor();
      await page.getByText("パスワードを入力してください。").waitFor();
      await signInJa(page, "admin", "wrong-password-123");
      await page.getByText("ユーザー名またはパスワードが正しくありません。").waitFor();
      await audit(page, "ja-sign-in-error");
    });

    await test("ja: the account page, its menu and the users page, with dates and counts for the locale", async () => {
      await page.getByLabel("パスワード", { exact: true }).fill(adminPassword);
      await page.getByRole("button", { name: "サインイン", exact: true }).click();
      await page.getByRole("heading", { name: "アカウント" }).waitFor({ timeout: 20_000 });
      assert.match(await page.getByTestId("session-times").textContent(),
        /^サインイン日時: \d{4}\/\d{1,2}\/\d{1,2} \d{1,2}:\d{2} このセッションは遅くとも \d{4}\/\d{1,2}\/\d{1,2} \d{1,2}:\d{2} に終了します。$/);
      await page.getByText("ロール: admin").first().waitFor();
      await audit(page, "ja-account");
      await page.getByRole("button", { name: "アカウントメニュー" }).click();
      await page.getByRole("menuitem", { name: "すべての端末からサインアウト" }).waitFor();
      await audit(page, "ja-account-menu");
      await page.getByRole("button", { name: "アカウントメニュー" }).click();
      await page.getByRole("link", { name: "ユーザー" }).click();
      await page.getByRole("heading", { name: "ユーザー", exact: true }).waitFor();
      await page.getByTestId("user-count").getByText("ユーザー 2 人").waitFor();
      await page.locator('tr[data-user="olga"]').getByRole("cell", { name: "有効", exact: true }).waitFor();
      await audit(page, "ja-users-admin");
    });

    await test("ja: creating a user, the confirmation and the server's refusal are in Japanese", async () => {
      const form = page.getByRole("form", { name: "ユーザーを作成" });
      await form.getByLabel("名前", { exact: true }).fill("Bad_Name");
      await form.getByLabel("メールアドレス").fill("not-an-address");
      await form.getByRole("button", { name: "作成" }).click();
      await form.getByText("小文字の DNS ラベルを使用してください（英小文字・数字・「-」、63 文字以内").waitFor();
      await form.getByText("ada@example.com のようなメールアドレスを入力するか、空欄にしてください。").waitFor();
      await audit(page, "ja-users-create-error");
      await form.getByLabel("名前", { exact: true }).fill("kenji");
      await form.getByLabel("表示名").fill("山田 健二");
      await form.getByLabel("メールアドレス").fill("kenji@example.com");
      await form.getByRole("button", { name: "作成" }).click();
      await page.getByText("kenji のパスワード（表示は一度だけです。今すぐコピーしてください）:").waitFor();
      kenji = (await page.getByTestId("generated-password").textContent()).trim();
      assert.ok(kenji.length >= 12);
      await page.getByTestId("user-count").getByText("ユーザー 3 人").waitFor();
      await audit(page, "ja-users-password");
      await page.getByRole("button", { name: "閉じる" }).click();
      const row = page.locator('tr[data-user="admin"]');
      await row.getByRole("button", { name: "削除", exact: true }).click();
      await row.getByText("admin を削除しますか？この操作は元に戻せません。").waitFor();
      await audit(page, "ja-users-confirm");
      await row.getByRole("button", { name: "削除する" }).click();
      await row.getByText("拒否されました: admin は最後の有効な管理者のため、無効化、降格、削除はできません。" +
        "先に別のユーザーを有効な管理者にしてください。").waitFor();
      await audit(page, "ja-users-refused");
      const k = page.locator('tr[data-user="kenji"]');
      await k.getByRole("button", { name: "無効にする" }).click();
      await k.getByText("無効、パスワード変更が必要").waitFor();
      await k.getByText("「無効にする」を実行しました。").waitFor();
      await k.getByRole("button", { name: "有効にする" }).click();
      await k.getByText("有効、パスワード変更が必要").waitFor();
    });

    await test("ja: a user with an administrator's password changes it on the Japanese must-change screen", async () => {
      await page.getByRole("button", { name: "アカウントメニュー" }).click();
      await page.getByRole("menuitem", { name: "サインアウト", exact: true }).click();
      await page.getByRole("heading", { name: "Ichor にサインイン" }).waitFor();
      await signInJa(page, "kenji", kenji);
      await page.getByRole("heading", { name: "新しいパスワードの設定" }).waitFor();
      await audit(page, "ja-must-change");
      await page.getByLabel("現在のパスワード").fill(kenji);
      await page.getByLabel("新しいパスワード", { exact: true }).fill("kenji-correct-horse-1");
      await page.getByLabel("新しいパスワード（確認）").fill("kenji-correct-horse-2");
      await page.getByRole("button", { name: "パスワードを変更" }).click();
      await page.getByText("新しいパスワードが一致しません。").waitFor();
      await page.getByLabel("新しいパスワード", { exact: true }).fill("short");
      await page.getByRole("button", { name: "パスワードを変更" }).click();
      await page.getByText("12 文字以上にしてください。").waitFor();
      await audit(page, "ja-must-change-error");
      await page.getByLabel("新しいパスワード", { exact: true }).fill("kenji-correct-horse-1");
      await page.getByLabel("新しいパスワード（確認）").fill("kenji-correct-horse-1");
      await Promise.all([
        page.waitForEvent("load", { timeout: 30_000 }),
        page.getByRole("button", { name: "パスワードを変更" }).click(),
      ]);
      await page.getByRole("heading", { name: "アカウント" }).waitFor({ timeout: 20_000 });
      await page.getByText("ロール: viewer").first().waitFor();
    });

    await test("the language switch overrides the browser's language and is remembered", async () => {
      await page.getByLabel("言語").selectOption("en");
      await page.getByRole("heading", { name: "Account" }).waitFor();
      assert.equal(await page.evaluate(() => document.documentElement.lang), "en");
      assert.equal(await page.evaluate(() => localStorage.getItem("ichor.lang")), "en");
      await page.reload();
      await page.getByRole("heading", { name: "Account" }).waitFor();
      assert.equal(await page.evaluate(() => document.documentElement.lang), "en", "still English after a reload");
      await page.getByLabel("Language").selectOption("ja");
      await page.getByRole("heading", { name: "アカウント" }).waitFor();
      assert.equal(await page.evaluate(() => document.documentElement.lang), "ja");
    });
  } finally {
    await b.close();
  }
}

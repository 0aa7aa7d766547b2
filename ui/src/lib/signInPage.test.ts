import { describe, expect, it } from "vitest";
import { parseFactorPage, parseSignInPage, purposeOf } from "./signInPage";
import { setLanguage, t } from "../strings";

const cli = { ticket: "t.k.s", client: "ichor-cli", port: 53121, origin: "http://127.0.0.1:53121", username: "" };

describe("the issuer's sign-in page data", () => {
  it("names the CLI and its port, without grouping the port's digits, in both languages", () => {
    const page = parseSignInPage(JSON.stringify(cli))!;
    setLanguage("en");
    expect(t(purposeOf(page))).toBe(
      "Signing in the ichor CLI (kubectl, client ichor-cli) on this computer, port 53121. " +
        "Go on only if you just ran ichor auth login or kubectl and it printed this port.");
    setLanguage("ja");
    expect(t(purposeOf(page))).toContain("ポート 53121 で待っている ichor CLI");
    setLanguage("en");
  });

  it("names the web app by its origin", () => {
    const page = parseSignInPage(JSON.stringify({ ...cli, client: "ichor-ui", port: null, origin: "https://ichor.example.com" }))!;
    expect(t(purposeOf(page))).toBe("Signing in to Ichor's web app at https://ichor.example.com (client ichor-ui).");
  });

  it("takes the refusal of the last attempt as a message of the catalogs", () => {
    const page = parseSignInPage(JSON.stringify({ ...cli, username: "alice", error: { key: "tooManyAttempts", values: { seconds: 7 } } }))!;
    expect(page.username).toBe("alice");
    expect(t(page.error!)).toBe("Too many sign-in attempts. Wait 7 seconds and try again.");
    const wrong = parseSignInPage(JSON.stringify({ ...cli, error: { key: "wrongCredentials" } }))!;
    expect(t(wrong.error!)).toBe("The user name or password is incorrect.");
  });

  it("drops an error that is not one of the sign-in refusals", () => {
    for (const error of [{ key: "refusedOther", values: { detail: "<b>x</b>" } }, { key: "toString" }, "wrongCredentials", null]) {
      expect(parseSignInPage(JSON.stringify({ ...cli, error }))!.error, JSON.stringify(error)).toBeNull();
    }
  });

  it("refuses a block that is missing or not of the page's shape", () => {
    for (const text of [null, undefined, "", "not json", "[]", "null", JSON.stringify({ ...cli, ticket: "" }),
      JSON.stringify({ ...cli, client: 1 })]) {
      expect(parseSignInPage(text as string | null), String(text)).toBeNull();
    }
    expect(parseSignInPage(JSON.stringify({ ...cli, port: 70000 }))!.port).toBeNull();
  });
});

const factor = { factor_ticket: "f.t.s", factors: ["totp", "recovery"], client: "ichor-cli", port: 53121,
  origin: "http://127.0.0.1:53121" };

describe("the issuer's second-step page data", () => {
  it("holds the factor ticket, the typed kinds and whom the sign-in is for", () => {
    const page = parseFactorPage(JSON.stringify(factor))!;
    expect(page).toEqual({ factorTicket: "f.t.s", factors: ["totp", "recovery"], client: "ichor-cli", port: 53121,
      origin: "http://127.0.0.1:53121", error: null, passkeyOptions: null });
    expect(t(purposeOf(page))).toContain("port 53121");
    // The password step's data is not the second step's, and the other way round.
    expect(parseFactorPage(JSON.stringify(cli))).toBeNull();
    expect(parseSignInPage(JSON.stringify(factor))).toBeNull();
  });

  it("takes the second step's refusals only", () => {
    const wrong = parseFactorPage(JSON.stringify({ ...factor, error: { key: "wrongCode" } }))!;
    expect(t(wrong.error!)).toBe("The code is incorrect or was used already.");
    const limited = parseFactorPage(JSON.stringify({ ...factor, error: { key: "tooManyAttempts", values: { seconds: 9 } } }))!;
    expect(t(limited.error!)).toBe("Too many sign-in attempts. Wait 9 seconds and try again.");
    expect(parseFactorPage(JSON.stringify({ ...factor, error: { key: "wrongCredentials" } }))!.error).toBeNull();
  });

  it("holds a passkey's options when a passkey is offered, alone or beside a code", () => {
    const passkey_options = { publicKey: { challenge: "AAEC", rpId: "localhost", allowCredentials: [] } };
    const alone = parseFactorPage(JSON.stringify({ ...factor, factors: ["passkey"], passkey_options }))!;
    expect(alone.factors).toEqual([]);
    expect(alone.passkeyOptions).toEqual(passkey_options);
    const both = parseFactorPage(JSON.stringify({ ...factor, factors: ["passkey", "recovery"], passkey_options }))!;
    expect(both.factors).toEqual(["recovery"]);
    expect(both.passkeyOptions).toEqual(passkey_options);
  });

  it("refuses a block without a ticket, without a kind this page takes, or not of the shape", () => {
    // A passkey offered without its options is not a kind this page can take.
    for (const f of [{ ...factor, factor_ticket: "" }, { ...factor, factors: ["passkey"] }, { ...factor, factors: "totp" },
      { ...factor, factors: ["passkey"], passkey_options: { publicKey: {} } },
      { ...factor, client: 1 }, { ...factor, origin: null }]) {
      expect(parseFactorPage(JSON.stringify(f)), JSON.stringify(f)).toBeNull();
    }
    expect(parseFactorPage("[]")).toBeNull();
  });
});


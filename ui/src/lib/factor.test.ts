import { afterEach, describe, expect, it } from "vitest";
import { checkCode, codeHint, digitsOnly, mustStartAgain, parseFactorChallenge, typedFactors } from "./factor";
import { factorRefusal } from "./refusal";
import { S, msg, setLanguage, t } from "../strings";

afterEach(() => setLanguage("en"));

describe("the second step's request", () => {
  it("is an answer with a factor ticket, keeping the typed kinds only", () => {
    expect(parseFactorChallenge({ factor_ticket: "f.t.s", factors: ["totp", "recovery"] }))
      .toEqual({ factorTicket: "f.t.s", factors: ["totp", "recovery"], passkeyOptions: null });
    // A passkey without its options cannot be used.
    expect(parseFactorChallenge({ factor_ticket: "f", factors: ["recovery", "passkey", "totp", 7] }))
      .toEqual({ factorTicket: "f", factors: ["totp", "recovery"], passkeyOptions: null });
    expect(parseFactorChallenge({ factor_ticket: "f", factors: ["passkey"] }))
      .toEqual({ factorTicket: "f", factors: [], passkeyOptions: null });
    expect(typedFactors("totp")).toEqual([]);
  });

  it("keeps a passkey's options when a passkey is offered and they are WebAuthn's", () => {
    const options = { publicKey: { challenge: "AAEC", rpId: "ichor.test", allowCredentials: [{ type: "public-key", id: "AQ" }] } };
    expect(parseFactorChallenge({ factor_ticket: "f", factors: ["passkey", "recovery"], passkey_options: options }))
      .toEqual({ factorTicket: "f", factors: ["recovery"], passkeyOptions: options });
    // Options without a passkey offered, or not of the shape, are dropped.
    expect(parseFactorChallenge({ factor_ticket: "f", factors: ["recovery"], passkey_options: options })!.passkeyOptions).toBeNull();
    for (const bad of [{ publicKey: { challenge: 7 } }, { challenge: "AAEC" }, "x", { publicKey: { challenge: "a+b" } }]) {
      expect(parseFactorChallenge({ factor_ticket: "f", factors: ["passkey"], passkey_options: bad })!.passkeyOptions,
        JSON.stringify(bad)).toBeNull();
    }
  });

  it("is not an answer with a redirect, an empty ticket or no object", () => {
    for (const body of [{ redirect_uri: "https://x/cb?code=c" }, { factor_ticket: "", factors: ["totp"] },
      { factor_ticket: 1 }, null, "factor_ticket", []]) {
      expect(parseFactorChallenge(body), JSON.stringify(body)).toBeNull();
    }
  });

  it("hints at what the user has: an app code, a recovery code, or either", () => {
    expect(t(msg(codeHint(["totp"])))).toBe("Enter the 6-digit code from your authenticator app.");
    expect(t(msg(codeHint(["recovery"])))).toBe("Enter one of your recovery codes.");
    expect(t(msg(codeHint(["totp", "recovery"]))))
      .toBe("Enter the 6-digit code from your authenticator app, or one of your recovery codes.");
    setLanguage("ja");
    expect(S[codeHint(["totp", "recovery"])]).toContain("リカバリーコード");
    expect(digitsOnly(["totp"])).toBe(true);
    expect(digitsOnly(["totp", "recovery"])).toBe(false);
  });

  it("asks for a code before posting", () => {
    expect(checkCode("  ")).toEqual(msg("enterCode"));
    expect(checkCode(" 123456 ")).toBeNull();
  });
});

describe("the second step's refusals as shown", () => {
  it("a wrong or used code, in the user's language", () => {
    const wrong = factorRefusal(401, "access_denied", "The code is incorrect or was used already.", null);
    expect(wrong).toEqual(msg("wrongCode"));
    expect(t(wrong)).toBe("The code is incorrect or was used already.");
    setLanguage("ja");
    expect(t(wrong)).toBe("コードが正しくないか、すでに使用されています。");
  });

  it("the limit, with the Retry-After seconds", () => {
    expect(factorRefusal(429, "slow_down", "", 42)).toEqual(msg("tooManyAttempts", { seconds: 42 }));
    expect(t(factorRefusal(429, "slow_down", "", 42))).toBe("Too many sign-in attempts. Wait 42 seconds and try again.");
  });

  it("an expired ticket or a sign-in changed since the password: start again", () => {
    for (const d of ["This sign-in request has expired or is invalid.",
      "This sign-in is no longer valid. Start it again from the application."]) {
      const m = factorRefusal(400, "invalid_request", d, null);
      expect(m, d).toEqual(msg("factorExpired"));
      expect(mustStartAgain(m)).toBe(true);
    }
    expect(mustStartAgain(msg("wrongCode"))).toBe(false);
  });

  it("the password step's other refusals, else the server's sentence", () => {
    expect(factorRefusal(403, "access_denied", "This account is disabled. Ask an administrator to enable it.", null).key)
      .toBe("accountDisabled");
    expect(factorRefusal(503, "temporarily_unavailable", "sign-in is unavailable", null).key).toBe("signInUnavailable");
    expect(factorRefusal(400, "invalid_request", "the body must be {factor_ticket, code}", null))
      .toEqual(msg("refusedOther", { detail: "the body must be {factor_ticket, code}" }));
  });
});

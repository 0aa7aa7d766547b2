import { afterEach, describe, expect, it } from "vitest";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { FactorsSchema } from "../gen/ichor/v1alpha1/user_pb";
import {
  checkChange, checkEnrol, checkPassword, checkTotpCode, codeRefused, groupSecret, hasRealFactor, methodRows, normalizeTotpCode,
  parseTime, passwordCodeKinds, recoveryCodesFile, removalEffect, signedInWithFactor, typedKinds,
} from "./ownFactors";
import { GrpcCode, apiRefusal } from "./refusal";
import { msg, setLanguage, t } from "../strings";

afterEach(() => setLanguage("en"));

const at = "2026-12-03T13:05:00Z";
const factors = (f: MessageInitShape<typeof FactorsSchema>) => create(FactorsSchema, f);

describe("the sign-in methods as listed", () => {
  it("lists passkeys, then the app, then the recovery codes, with their dates", () => {
    const f = factors({
      totp: { createdAt: at },
      recovery: { remaining: 8, createdAt: at },
      passkeys: [{ id: "cred-1", name: "YubiKey", createdAt: at, lastUsedAt: "", backupEligible: false }],
    });
    expect(methodRows(f)).toEqual([
      {
        kind: "passkey", id: "cred-1", name: "YubiKey", createdAt: Date.UTC(2026, 11, 3, 13, 5), lastUsedAt: null, synced: false,
        cloned: false, clonedAt: null,
      },
      { kind: "totp", createdAt: Date.UTC(2026, 11, 3, 13, 5) },
      { kind: "recovery", remaining: 8, createdAt: Date.UTC(2026, 11, 3, 13, 5) },
    ]);
    expect(methodRows(factors({}))).toEqual([]);
    expect(methodRows(undefined)).toEqual([]);
  });

  it("marks a passkey of which a copy was detected, with the time when it is readable", () => {
    const f = factors({
      passkeys: [
        { id: "a", name: "Laptop", createdAt: at, lastUsedAt: at, backupEligible: true, clonedAt: "2026-12-04T08:00:00Z" },
        { id: "b", name: "Phone", createdAt: at, clonedAt: "" },
        { id: "c", name: "Old", createdAt: at, clonedAt: "not a time" },
      ],
    });
    const rows = methodRows(f).map((r) => (r.kind === "passkey" ? [r.id, r.cloned, r.clonedAt, r.synced] : null));
    expect(rows).toEqual([
      ["a", true, Date.UTC(2026, 11, 4, 8), true],
      ["b", false, null, false],
      // Unreadable time: still disabled, shown without the time.
      ["c", true, null, false],
    ]);
    // A disabled passkey is still a factor the issuer counts: changes still ask for a code.
    expect(hasRealFactor(factors({ passkeys: [{ id: "a", name: "n", createdAt: at, clonedAt: at }] }))).toBe(true);
  });

  it("reads the API's RFC 3339 times, and nothing from an empty or broken one", () => {
    expect(parseTime("2026-12-03T13:05:00.5+09:00")).toBe(Date.UTC(2026, 11, 3, 4, 5, 0, 500));
    expect(parseTime("")).toBeNull();
    expect(parseTime("yesterday")).toBeNull();
  });

  it("counts an app or a passkey as a factor, recovery codes alone not", () => {
    expect(hasRealFactor(factors({ totp: { createdAt: at } }))).toBe(true);
    expect(hasRealFactor(factors({ passkeys: [{ id: "p", name: "n", createdAt: at }] }))).toBe(true);
    expect(hasRealFactor(factors({ recovery: { remaining: 10, createdAt: at } }))).toBe(false);
    expect(hasRealFactor(null)).toBe(false);
  });

  it("hints at the codes the caller has: the app's, and recovery codes while any is left", () => {
    expect(typedKinds(factors({ totp: { createdAt: at }, recovery: { remaining: 3, createdAt: at } }))).toEqual(["totp", "recovery"]);
    expect(typedKinds(factors({ totp: { createdAt: at }, recovery: { remaining: 0, createdAt: at } }))).toEqual(["totp"]);
    expect(typedKinds(factors({}))).toEqual([]);
  });

  it("says what a removal does: the last app or passkey takes the recovery codes with it", () => {
    const appOnly = factors({ totp: { createdAt: at }, recovery: { remaining: 10, createdAt: at } });
    expect(removalEffect(appOnly, { kind: "totp" })).toBe("removeLastFactorText");
    expect(removalEffect(appOnly, { kind: "recovery" })).toBe("removeRecoveryText");
    const both = factors({ totp: { createdAt: at }, passkeys: [{ id: "p", name: "Key", createdAt: at }] });
    expect(removalEffect(both, { kind: "totp" })).toBe("removeFactorText");
    expect(removalEffect(both, { kind: "passkey", id: "p", name: "Key" })).toBe("removeFactorText");
    expect(removalEffect(factors({ passkeys: [{ id: "p", name: "Key", createdAt: at }] }), { kind: "passkey", id: "p", name: "Key" }))
      .toBe("removeLastFactorText");
  });
});

describe("the setup of an authenticator app", () => {
  it("shows the setup key in groups of four, for typing by hand", () => {
    expect(groupSecret("GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ")).toBe("GEZD GNBV GY3T QOJQ GEZD GNBV GY3T QOJQ");
    expect(groupSecret("ABCDEF")).toBe("ABCD EF");
    expect(groupSecret("")).toBe("");
  });

  it("takes six digits as the first code, spaces and dashes as people type them", () => {
    expect(normalizeTotpCode(" 123 456 ")).toBe("123456");
    expect(normalizeTotpCode("123-456")).toBe("123456");
    expect(checkTotpCode("123 456")).toBeNull();
    expect(checkTotpCode("  ")).toEqual(msg("enterCode"));
    for (const bad of ["12345", "1234567", "12345a", "ABCD-EFGH"]) expect(checkTotpCode(bad), bad).toEqual(msg("enterSixDigits"));
    setLanguage("ja");
    expect(t(checkTotpCode("1")!)).toBe("アプリに表示されている 6 桁の数字を入力してください。");
  });

  it("asks for the password, and for a code besides it to change the factors", () => {
    expect(checkPassword("")).toEqual({ password: msg("enterCurrent") });
    expect(checkPassword("x")).toEqual({});
    expect(checkChange("", " ")).toEqual({ password: msg("enterCurrent"), code: msg("enterCode") });
    expect(checkChange("pw", "ABCD-EFGH-IJKL-MNOP")).toEqual({});
  });

  it("asks for a code to add a factor only beside an app or a passkey", () => {
    expect(checkEnrol("", "", false)).toEqual({ password: msg("enterCurrent") });
    expect(checkEnrol("pw", "", false)).toEqual({});
    expect(checkEnrol("pw", "  ", true)).toEqual({ code: msg("enterCode") });
    expect(checkEnrol("", "", true)).toEqual({ password: msg("enterCurrent"), code: msg("enterCode") });
    expect(checkEnrol("pw", "123456", true)).toEqual({});
  });

  it("empties the code field after the code was refused, not after another refusal", () => {
    expect(codeRefused(apiRefusal(GrpcCode.InvalidArgument, "code: is incorrect or was used already"))).toBe(true);
    expect(codeRefused(apiRefusal(GrpcCode.FailedPrecondition, "code: too many wrong codes; wait 16 seconds and try again"))).toBe(true);
    expect(codeRefused(apiRefusal(GrpcCode.InvalidArgument,
      "code: required: a current code of your authenticator app or an unused recovery code (the password alone does not change your second factors or your password)"))).toBe(true);
    expect(codeRefused(apiRefusal(GrpcCode.InvalidArgument, "password: does not match your current password"))).toBe(false);
  });
});

describe("the code a password change asks for", () => {
  const jwt = (payload: unknown) =>
    ["e30", btoa(JSON.stringify(payload)).replace(/=+$/, "").replace(/\+/g, "-").replace(/\//g, "_"), "sig"].join(".");

  it("reads from the session whether its sign-in passed a factor", () => {
    expect(signedInWithFactor(jwt({ amr: ["pwd", "otp", "mfa"] }))).toBe(true);
    expect(signedInWithFactor(jwt({ amr: ["pwd", "hwk", "mfa"] }))).toBe(true);
    expect(signedInWithFactor(jwt({ amr: ["pwd"] }))).toBe(false);
    expect(signedInWithFactor(jwt({ amr: "mfa" }))).toBe(false);
    expect(signedInWithFactor(jwt({}))).toBe(false);
    expect(signedInWithFactor("not a token")).toBe(false);
    expect(signedInWithFactor(null)).toBe(false);
  });

  it("asks for the caller's typed kinds beside an app or a passkey, and for nothing without one", () => {
    expect(passwordCodeKinds(factors({ totp: { createdAt: at }, recovery: { remaining: 3, createdAt: at } }), true))
      .toEqual(["totp", "recovery"]);
    expect(passwordCodeKinds(factors({ totp: { createdAt: at } }), true)).toEqual(["totp"]);
    // Passkeys alone: a recovery code (the hint says so even when none is left).
    expect(passwordCodeKinds(factors({ passkeys: [{ id: "a", name: "Key", createdAt: at }], recovery: { remaining: 2 } }), true))
      .toEqual(["recovery"]);
    expect(passwordCodeKinds(factors({}), true)).toBeUndefined();
    expect(passwordCodeKinds(factors({ recovery: { remaining: 4 } }), false)).toBeUndefined();
  });

  it("goes by the session while the factors are unknown (as while the password must be changed)", () => {
    expect(passwordCodeKinds(null, true)).toEqual(["totp", "recovery"]);
    expect(passwordCodeKinds(undefined, false)).toBeUndefined();
  });
});

describe("the recovery codes' file", () => {
  it("is a text file named for the user with one code a line after the header", () => {
    const f = recoveryCodesFile("ada/../x", "https://id.example.com", ["AAAA-BBBB", "CCCC-DDDD"], "Codes for ada.");
    expect(f.filename).toBe("ichor-recovery-codes-ada_.._x.txt");
    expect(f.text).toBe("Codes for ada.\nhttps://id.example.com\n\nAAAA-BBBB\nCCCC-DDDD\n");
  });
});

describe("the policy's and the factor calls' refusals", () => {
  const MUST_ENROL = "set up a second factor first: the second-factor policy requires one of you, and until you have one only enrolling it is allowed";

  it("says the policy's refusal of every call but the enrolment", () => {
    const m = apiRefusal(GrpcCode.FailedPrecondition, MUST_ENROL);
    expect(t(m)).toBe("Set up a second factor first: your account requires one.");
    setLanguage("ja");
    expect(t(m)).toBe("先に 2 段階認証を設定してください。このアカウントには必要です。");
  });

  it("shows each refusal of the factor calls with its own message, not the server's sentence", () => {
    const cases: [number, string, string, Record<string, number>?][] = [
      [GrpcCode.FailedPrecondition, "you have an authenticator app already: remove it first (RemoveFactor, kind totp) to add another", "refusedTotpExists"],
      [GrpcCode.FailedPrecondition, "recovery codes stand beside an authenticator app or a passkey: add one first, and its recovery codes come with it", "refusedNoRealFactor"],
      [GrpcCode.FailedPrecondition, 'user "ada" has no password, so it has no second factors: ask an administrator to set a password', "refusedNoPasswordFactors"],
      [GrpcCode.FailedPrecondition, "you signed in with your identity provider: Ichor holds no password or second factor of yours; manage them there", "refusedExternalFactors"],
      [GrpcCode.Aborted, "your password or second factors were changed concurrently: sign in again and retry", "refusedFactorsChanged"],
      [GrpcCode.FailedPrecondition, "code: too many wrong codes; wait 16 seconds and try again", "refusedCodeWait", { seconds: 16 }],
      [GrpcCode.InvalidArgument, "code: is incorrect or was used already", "wrongCode"],
      [GrpcCode.InvalidArgument, "code: is not the authenticator app's current code: check that the secret was entered as shown and that the device's clock is right, then type the code shown now", "refusedTotpNotCurrent"],
      [GrpcCode.InvalidArgument, "code: required: a current code of your authenticator app or an unused recovery code (the password alone does not change your second factors or your password)", "enterCode"],
      [GrpcCode.InvalidArgument, "password: does not match your current password", "refusedWrongCurrent"],
      [GrpcCode.InvalidArgument, "password: is required: your current password confirms the change", "enterCurrent"],
      [GrpcCode.InvalidArgument, "ticket: has expired: start again with BeginTotp", "refusedEnrolExpired"],
      [GrpcCode.InvalidArgument, "ticket: is no longer valid: your password, second factors or sessions changed since it was made; start again with BeginTotp", "refusedEnrolExpired"],
      [GrpcCode.FailedPrecondition, "kind: you have no authenticator app to remove", "refusedFactorGone"],
      [8, "too many wrong passwords for this account or from this address: try again in 4 s", "refusedPasswordWait", { seconds: 4 }],
      [GrpcCode.Unavailable, "the password checks of this server are busy: try again in 2 s", "signInBusy", { seconds: 2 }],
    ];
    for (const [code, message, key, values] of cases) {
      const m = apiRefusal(code, message);
      expect(m.key, message).toBe(key);
      if (values) expect(m.values, message).toEqual(values);
      expect(m.key, message).not.toBe("refusedOther");
    }
    setLanguage("ja");
    expect(t(apiRefusal(GrpcCode.FailedPrecondition, "code: too many wrong codes; wait 16 seconds and try again")))
      .toBe("間違ったコードが多すぎます。16 秒待ってから、もう一度お試しください。");
  });
});

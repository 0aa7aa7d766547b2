import { afterEach, describe, expect, it } from "vitest";
import { GrpcCode, apiRefusal, signInRefusal } from "./refusal";
import { setLanguage, t } from "../strings";

afterEach(() => setLanguage("en"));

describe("the server's refusals as shown", () => {
  it("recognises the UserService's sentences and shows them in the chosen language", () => {
    const last = apiRefusal(GrpcCode.FailedPrecondition,
      'cannot disable, demote or delete the last enabled admin "admin": make another user an enabled admin first');
    expect(last).toEqual({ key: "refusedLastAdmin", values: { name: "admin" } });
    setLanguage("ja");
    expect(t(last)).toBe("admin は最後の有効な管理者のため、無効化、降格、削除はできません。先に別のユーザーを有効な管理者にしてください。");
    expect(t(apiRefusal(GrpcCode.PermissionDenied, "change your password first"))).toBe("先にパスワードを変更してください。");
    expect(apiRefusal(GrpcCode.NotFound, 'user "bob" does not exist')).toEqual({ key: "refusedNotFound", values: { name: "bob" } });
    expect(apiRefusal(GrpcCode.AlreadyExists, 'user "bob" exists already').key).toBe("refusedExists");
    expect(apiRefusal(GrpcCode.InvalidArgument, "old_password: does not match your current password").key).toBe("refusedWrongCurrent");
    expect(apiRefusal(GrpcCode.PermissionDenied, 'you may not grant role "admin": it is above your highest role "operator"'))
      .toEqual({ key: "refusedGrant", values: { role: "admin" } });
    expect(apiRefusal(GrpcCode.PermissionDenied,
      'ichor:olga may not list ichorusers: ask an administrator for a role that allows it').key).toBe("refusedNotAllowed");
  });
  it("falls back on the code, then on the server's own sentence", () => {
    expect(apiRefusal(GrpcCode.Unavailable, "store down").key).toBe("refusedUnavailable");
    expect(apiRefusal(GrpcCode.Aborted, "conflict").key).toBe("refusedConflict");
    expect(apiRefusal(GrpcCode.Unauthenticated, "token expired").key).toBe("refusedSignedOut");
    expect(apiRefusal(GrpcCode.InvalidArgument, "email: must not contain spaces"))
      .toEqual({ key: "refusedInvalid", values: { detail: "email: must not contain spaces" } });
    expect(t(apiRefusal(2, "something odd"))).toBe("something odd");
  });
  it("maps the sign-in endpoint's OAuth errors", () => {
    expect(signInRefusal(401, "access_denied", "The user name or password is incorrect.", null).key).toBe("wrongCredentials");
    expect(signInRefusal(403, "access_denied", "This account is disabled. Ask an administrator to enable it.", null).key)
      .toBe("accountDisabled");
    const limited = signInRefusal(429, "slow_down", "too many requests; wait before trying again", 30);
    expect(limited).toEqual({ key: "tooManyAttempts", values: { seconds: 30 } });
    setLanguage("ja");
    expect(t(limited)).toBe("サインインの試行回数が多すぎます。30 秒待ってから、もう一度お試しください。");
    expect(signInRefusal(503, "temporarily_unavailable", "sign-in is busy; try again in 3 seconds", 3).key).toBe("signInBusy");
    expect(signInRefusal(503, "temporarily_unavailable", "sign-in is unavailable; try again shortly", 5).key)
      .toBe("signInUnavailable");
    expect(signInRefusal(400, "invalid_request", "This sign-in request has expired or is invalid.", null).key).toBe("signInExpired");
    expect(t(signInRefusal(400, "invalid_request", "", null))).toBe("invalid_request");
  });
});

describe("the policy's refusals of a Kubernetes token at sign-in", () => {
  it("says to enrol or to change the password in the web UI first", () => {
    const enrol = signInRefusal(403, "access_denied", "You must set up a second factor before you can get a Kubernetes token. " +
      "Sign in to the Ichor web UI, set up a second factor on your account page, then sign in here again.", null);
    expect(enrol.key).toBe("mustEnrolForKube");
    const change = signInRefusal(403, "access_denied", "You must change your password before you can get a Kubernetes token. " +
      "Sign in to the Ichor web UI, change your password, then sign in here again.", null);
    expect(change.key).toBe("mustChangeForKube");
    setLanguage("ja");
    expect(t(enrol)).toContain("2 段階認証を設定する必要があります");
  });
});

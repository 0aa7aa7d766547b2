import { describe, expect, it } from "vitest";
import { checkEmail, checkName, checkPasswordChange } from "./validate";
import { checkRedirect } from "./login";
import { S, t } from "../strings";

describe("form checks", () => {
  it("accepts DNS labels and refuses others", () => {
    expect(checkName("ada-2")).toBeNull();
    for (const bad of ["", "Ada", "-ada", "ada-", "a_b", "a".repeat(64)]) expect(checkName(bad)?.key).toBe("nameInvalid");
    expect(t(checkName("Ada")!)).toContain("at most 63");
  });
  it("allows an empty e-mail and refuses one without @", () => {
    expect(checkEmail("")).toBeNull();
    expect(checkEmail("ada@example.com")).toBeNull();
    expect(checkEmail("ada")?.key).toBe("emailInvalid");
  });
  it("refuses a password of eleven bytes, a mismatch and a reused password", () => {
    const short = checkPasswordChange("old", "elevenbytes", "elevenbytes").next;
    expect(short?.key).toBe("tooShort");
    expect(t(short!)).toBe("Use at least 12 characters.");
    expect(checkPasswordChange("old", "twelve-bytes", "twelve-byteZ").repeat?.key).toBe("mismatch");
    expect(checkPasswordChange("twelve-bytes", "twelve-bytes", "twelve-bytes").next?.key).toBe("sameAsOld");
    expect(checkPasswordChange("", "twelve-bytes", "twelve-bytes").current?.key).toBe("enterCurrent");
    expect(checkPasswordChange("old", "twelve-bytes", "twelve-bytes")).toEqual({});
  });
});

describe("the login redirect check", () => {
  const cb = "https://127.0.0.1:8443/auth/callback";
  it("returns the code of this page's callback with this page's state", () => {
    expect(checkRedirect(`${cb}?code=c1&state=s1`, cb, "s1")).toBe("c1");
  });
  it("refuses another origin, another path and another state", () => {
    expect(() => checkRedirect("https://evil.example/auth/callback?code=c&state=s1", cb, "s1")).toThrow(S.badRedirect);
    expect(() => checkRedirect("https://127.0.0.1:8443/other?code=c&state=s1", cb, "s1")).toThrow(S.badRedirect);
    expect(() => checkRedirect(`${cb}?code=c&state=s2`, cb, "s1")).toThrow(S.badState);
    expect(() => checkRedirect(`${cb}?state=s1`, cb, "s1")).toThrow(S.badState);
  });
});

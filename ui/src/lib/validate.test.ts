import { describe, expect, it } from "vitest";
import { checkEmail, checkName, checkPasswordChange } from "./validate";
import { checkRedirect } from "./login";
import { S } from "../strings";

describe("form checks", () => {
  it("accepts DNS labels and refuses others", () => {
    expect(checkName("ada-2")).toBe("");
    for (const bad of ["", "Ada", "-ada", "ada-", "a_b", "a".repeat(64)]) expect(checkName(bad)).toBe(S.nameInvalid);
  });
  it("allows an empty e-mail and refuses one without @", () => {
    expect(checkEmail("")).toBe("");
    expect(checkEmail("ada@example.com")).toBe("");
    expect(checkEmail("ada")).toBe(S.emailInvalid);
  });
  it("refuses a password of eleven bytes, a mismatch and a reused password", () => {
    expect(checkPasswordChange("old", "elevenbytes", "elevenbytes").next).toBe(S.tooShort);
    expect(checkPasswordChange("old", "twelve-bytes", "twelve-byteZ").repeat).toBe(S.mismatch);
    expect(checkPasswordChange("twelve-bytes", "twelve-bytes", "twelve-bytes").next).toBe(S.sameAsOld);
    expect(checkPasswordChange("", "twelve-bytes", "twelve-bytes").current).toBe(S.enterCurrent);
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

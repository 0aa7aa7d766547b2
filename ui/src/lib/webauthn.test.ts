import { describe, expect, it } from "vitest";
import {
  browserRefusal, checkPasskeyName, creationOptions, credentialJson, fromBase64url, requestOptions, toBase64url,
} from "./webauthn";
import { apiRefusal, passkeyRefusal } from "./refusal";
import { t } from "../strings";

const bytes = (...b: number[]) => new Uint8Array(b);
const buf = (...b: number[]) => bytes(...b).buffer;

describe("base64url", () => {
  it("round-trips every byte, without padding, and reads padded text too", () => {
    const all = Uint8Array.from({ length: 256 }, (_, i) => i);
    const text = toBase64url(all);
    expect(text).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(fromBase64url(text)).toEqual(all);
    for (let n = 0; n < 6; n++) {
      const b = all.slice(250 - n, 250);
      expect(fromBase64url(toBase64url(b))).toEqual(b);
    }
    expect(toBase64url(bytes(0xfb, 0xff))).toBe("-_8");
    expect(fromBase64url("-_8=")).toEqual(bytes(0xfb, 0xff));
    expect(toBase64url(new DataView(buf(9, 1, 2, 3), 1, 2))).toBe("AQI");
  });

  it("refuses other alphabets and impossible lengths", () => {
    for (const bad of ["a+b", "a/b", "ab cd", "A", "AAAAA", "é"]) expect(() => fromBase64url(bad), bad).toThrow();
  });
});

describe("the issuer's options for the browser", () => {
  it("decode a registration's challenge, user id and excluded credentials, keeping the rest", () => {
    const o = creationOptions({ publicKey: {
      rp: { id: "localhost", name: "Ichor" },
      user: { id: "AAEC", name: "admin", displayName: "admin" },
      challenge: "AwQF",
      pubKeyCredParams: [{ type: "public-key", alg: -7 }],
      excludeCredentials: [{ type: "public-key", id: "Bgc", transports: ["internal"] }],
      authenticatorSelection: { userVerification: "required" },
    } }).publicKey!;
    expect(new Uint8Array(o.challenge as ArrayBuffer)).toEqual(bytes(3, 4, 5));
    expect(new Uint8Array(o.user.id as ArrayBuffer)).toEqual(bytes(0, 1, 2));
    expect(o.user.name).toBe("admin");
    expect(new Uint8Array(o.excludeCredentials![0].id as ArrayBuffer)).toEqual(bytes(6, 7));
    expect(o.excludeCredentials![0].transports).toEqual(["internal"]);
    expect(o.rp.id).toBe("localhost");
    expect(o.authenticatorSelection?.userVerification).toBe("required");
  });

  it("decode a sign-in's challenge and allowed credentials", () => {
    const o = requestOptions({ publicKey: { challenge: "AwQF", rpId: "localhost", userVerification: "required",
      allowCredentials: [{ type: "public-key", id: "Bgc" }] } }).publicKey!;
    expect(new Uint8Array(o.challenge as ArrayBuffer)).toEqual(bytes(3, 4, 5));
    expect(new Uint8Array(o.allowCredentials![0].id as ArrayBuffer)).toEqual(bytes(6, 7));
    expect(o.rpId).toBe("localhost");
    expect(requestOptions({ publicKey: { challenge: "" } }).publicKey!.allowCredentials).toBeUndefined();
  });

  it("refuse options not of the WebAuthn shape", () => {
    for (const bad of [null, "x", {}, { publicKey: null }, { publicKey: { challenge: 1 } },
      { publicKey: { challenge: "AA", allowCredentials: [{ id: 5 }] } }, { publicKey: { challenge: "A+" } }]) {
      expect(() => requestOptions(bad), JSON.stringify(bad)).toThrow();
    }
    expect(() => creationOptions({ publicKey: { challenge: "AA" } }), "no user").toThrow();
    expect(() => creationOptions({ publicKey: { challenge: "AA", user: { id: "AA" }, excludeCredentials: "x" } })).toThrow();
  });
});

describe("the browser's answer for the issuer", () => {
  it("is toJSON's where the browser has it", () => {
    const json = { id: "x", rawId: "x", type: "public-key", response: {}, clientExtensionResults: {} };
    expect(credentialJson({ id: "y", rawId: buf(), type: "public-key", response: { clientDataJSON: buf() }, toJSON: () => json }))
      .toBe(json);
  });

  it("is written here for a registration: attestation object and transports", () => {
    expect(credentialJson({
      id: "BwgJ", rawId: buf(7, 8, 9), type: "public-key",
      response: { clientDataJSON: buf(123, 125), attestationObject: buf(0xa0), getTransports: () => ["internal", "hybrid"] },
      getClientExtensionResults: () => ({ credProps: { rk: true } }),
    })).toEqual({
      id: "BwgJ", rawId: "BwgJ", type: "public-key",
      response: { clientDataJSON: "e30", attestationObject: "oA", transports: ["internal", "hybrid"] },
      clientExtensionResults: { credProps: { rk: true } },
    });
  });

  it("is written here for a sign-in: authenticator data, signature and the user handle when given", () => {
    const response = { clientDataJSON: buf(123, 125), authenticatorData: buf(1, 2), signature: buf(3, 4), userHandle: null };
    expect(credentialJson({ id: "Bw", rawId: buf(7), type: "public-key", response,
      getClientExtensionResults: () => ({ prf: { results: { first: buf(1) } } } as AuthenticationExtensionsClientOutputs) }))
      .toEqual({ id: "Bw", rawId: "Bw", type: "public-key", clientExtensionResults: { prf: { results: { first: buf(1) } } },
        response: { clientDataJSON: "e30", authenticatorData: "AQI", signature: "AwQ" } });
    expect(() => credentialJson({ id: "Bw", rawId: buf(7), type: "public-key", response: { clientDataJSON: buf() } })).toThrow();
  });
});

describe("what the user reads", () => {
  it("names why the browser's prompt failed", () => {
    expect(browserRefusal("NotAllowedError", false).key).toBe("passkeyCancelled");
    expect(browserRefusal("NotAllowedError", true).key).toBe("passkeyCreateCancelled");
    expect(browserRefusal("InvalidStateError", true).key).toBe("passkeyExists");
    expect(browserRefusal("SecurityError", false).key).toBe("passkeyWrongSite");
    expect(browserRefusal("TypeError", false).key).toBe("passkeyFailed");
    expect(t(browserRefusal("NotAllowedError", false))).toMatch(/^The passkey was not used/);
  });

  it("checks a passkey's name as the issuer does: 1 to 64 printable characters", () => {
    expect(checkPasskeyName("  YubiKey 5  ")).toBeNull();
    expect(checkPasskeyName("鍵".repeat(64))).toBeNull();
    expect(checkPasskeyName(" ")?.key).toBe("enterPasskeyName");
    expect(checkPasskeyName("x".repeat(65))?.key).toBe("passkeyNameTooLong");
    expect(checkPasskeyName("a\u0007b")?.key).toBe("passkeyNamePrintable");
    expect(checkPasskeyName("a\u202eb")?.key).toBe("passkeyNamePrintable");
  });

  it("reads the issuer's passkey refusals", () => {
    expect(apiRefusal(9, "passkeys need the issuer to be reached by a domain name, and its URL https://127.0.0.1:1 names an IP address: use an authenticator app, or serve Ichor under a DNS name").key)
      .toBe("refusedPasskeyNeedsDomain");
    expect(apiRefusal(3, "credential_json: the passkey could not be verified for this site: x; start again, and make sure user verification (a PIN or biometrics) is on").key)
      .toBe("refusedPasskeyNotVerified");
    expect(apiRefusal(9, "you have 10 passkeys already; remove one before adding another")).toEqual({ key: "refusedTooManyPasskeys", values: { count: 10 } });
    expect(apiRefusal(9, "this passkey is registered already").key).toBe("passkeyExists");
    expect(apiRefusal(3, "ticket: has expired: start again with BeginPasskeyRegistration").key).toBe("refusedEnrolExpired");
    expect(passkeyRefusal(401, "access_denied", "", null).key).toBe("passkeyRefused");
    expect(passkeyRefusal(429, "slow_down", "", 3)).toEqual({ key: "tooManyAttempts", values: { seconds: 3 } });
  });
});

import { describe, expect, it } from "vitest";
import { PENDING_KEY, authorizeUrl, trustWarning, codeOf, isExternalSession, takePending, tokenMatches, type Pending } from "./external";
import { MemoryStorage, unsignedJwt } from "./testing";

const pending: Pending = {
  state: "st",
  nonce: "no",
  verifier: "ve",
  issuer: "https://idp.example.com/realms/corp",
  tokenEndpoint: "https://idp.example.com/realms/corp/token",
  clientId: "ichor-ui",
  redirectUri: "https://ichor.example.com/auth/callback",
};

function jwt(payload: object): string {
  return unsignedJwt(payload, "RS256");
}

describe("the external provider's sign-in", () => {
  it("asks for a code with S256 PKCE, state, nonce and this page's callback", () => {
    const url = new URL(authorizeUrl("https://idp.example.com/realms/corp/auth?kc=1", pending, "ch"));
    const q = url.searchParams;
    expect(q.get("kc")).toBe("1");
    expect(q.get("response_type")).toBe("code");
    expect(q.get("code_challenge")).toBe("ch");
    expect(q.get("code_challenge_method")).toBe("S256");
    expect(q.get("state")).toBe("st");
    expect(q.get("nonce")).toBe("no");
    expect(q.get("redirect_uri")).toBe(pending.redirectUri);
    expect(q.get("scope")).not.toContain("offline_access");
  });

  it("takes the pending request once", () => {
    const s = new MemoryStorage();
    s.setItem(PENDING_KEY, JSON.stringify(pending));
    expect(takePending(s)).toEqual(pending);
    expect(takePending(s)).toBeNull();
    s.setItem(PENDING_KEY, "{not json");
    expect(takePending(s)).toBeNull();
  });

  it("accepts only this page's callback with its state and the provider's iss", () => {
    const ok = `${pending.redirectUri}?code=c1&state=st&iss=${encodeURIComponent(pending.issuer)}`;
    expect(codeOf(ok, pending)).toBe("c1");
    expect(codeOf(`${pending.redirectUri}?code=c2&state=st`, pending)).toBe("c2");
    expect(() => codeOf(`${pending.redirectUri}?code=c&state=other`, pending)).toThrow();
    expect(() => codeOf(`${pending.redirectUri}?code=c&state=st&iss=https%3A%2F%2Fevil.example`, pending)).toThrow();
    expect(() => codeOf(`https://evil.example/auth/callback?code=c&state=st`, pending)).toThrow();
  });

  it("accepts a token of the provider for this client with this nonce only", () => {
    const good = { iss: pending.issuer, aud: "ichor-ui", nonce: "no" };
    expect(tokenMatches(jwt(good), pending)).toBe(true);
    expect(tokenMatches(jwt({ ...good, aud: ["ichor-ui", "x"] }), pending)).toBe(true);
    expect(tokenMatches(jwt({ ...good, nonce: "other" }), pending)).toBe(false);
    expect(tokenMatches(jwt({ ...good, aud: "kubernetes" }), pending)).toBe(false);
    expect(tokenMatches(jwt({ ...good, iss: "https://evil.example" }), pending)).toBe(false);
  });

  it("tells an external session from Ichor's by the token's issuer origin", () => {
    expect(isExternalSession(jwt({ iss: pending.issuer }), "https://ichor.example.com")).toBe(true);
    expect(isExternalSession(jwt({ iss: "https://ichor.example.com" }), "https://ichor.example.com")).toBe(false);
    expect(isExternalSession(null, "https://ichor.example.com")).toBe(false);
  });
});

describe("the trust warning", () => {
  const providers = [
    { id: "ichor", issuer: "https://ichor.example.com", clientId: "ichor-ui" },
    { id: "external", issuer: pending.issuer, clientId: "ichor-ui" },
  ];
  it("warns only when the cluster's apiserver trusts the provider differently", () => {
    const base = { providers, apiRequiresToken: true };
    expect(trustWarning({ ...base, externalTrust: { status: "differs", reason: "prefix" } })).toBe("prefix");
    expect(trustWarning({ ...base, externalTrust: { status: "matches" } })).toBeNull();
    expect(trustWarning({ ...base, externalTrust: { status: "unknown", reason: "no TalosCluster" } })).toBeNull();
    expect(trustWarning(base)).toBeNull();
    expect(trustWarning({ providers: providers.slice(0, 1), apiRequiresToken: true,
      externalTrust: { status: "differs", reason: "x" } })).toBeNull();
  });
});

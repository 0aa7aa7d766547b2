import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { MemoryStorage, unsignedJwt } from "./testing";

// The in-page sign-in against a fake issuer (fetch stubbed): the password step, then the second
// step when the issuer asks for it, ending with the tokens stored.

const ORIGIN = "https://ichor.test";
const storage = new MemoryStorage();
vi.stubGlobal("sessionStorage", storage);
vi.stubGlobal("location", { origin: ORIGIN });
const { SignInError, signIn, signInAgain } = await import("./login");

interface Answer { status?: number; body: unknown; headers?: Record<string, string> }
let posts: { url: string; body: unknown }[] = [];
let factorAnswers: Answer[] = [];
let loginAnswer: (state: string) => Answer;

function redirectFor(state: string): string {
  return `${ORIGIN}/auth/callback?code=the-code&state=${state}`;
}

beforeEach(() => {
  storage.clear();
  posts = [];
  factorAnswers = [];
  let state = "";
  let nonce = "";
  loginAnswer = () => ({ body: { factor_ticket: "f.t.s", factors: ["totp", "recovery"] } });
  vi.stubGlobal("sessionStorage", storage);
  vi.stubGlobal("location", { origin: ORIGIN });
  vi.stubGlobal("fetch", async (input: string, init?: RequestInit) => {
    const url = new URL(input, ORIGIN);
    const reply = (a: Answer) => new Response(JSON.stringify(a.body), { status: a.status ?? 200, headers: a.headers });
    if (init?.method === "POST") {
      const body = typeof init.body === "string" && init.body.startsWith("{") ? JSON.parse(init.body) : init.body;
      posts.push({ url: url.pathname, body });
    }
    switch (url.pathname) {
      case "/auth/config":
        return reply({ body: { providers: [{ id: "ichor", issuer: ORIGIN, clientId: "ichor-ui" }], apiRequiresToken: true } });
      case "/.well-known/openid-configuration":
        return reply({ body: { issuer: ORIGIN, authorization_endpoint: `${ORIGIN}/oidc/authorize`, token_endpoint: `${ORIGIN}/oidc/token` } });
      case "/oidc/authorize":
        state = url.searchParams.get("state")!;
        nonce = url.searchParams.get("nonce")!;
        return reply({ body: { ticket: "login-ticket" } });
      case "/oidc/login":
        return reply(loginAnswer(state));
      case "/oidc/login/factor": {
        const next = factorAnswers.shift() ?? { body: { redirect_uri: redirectFor(state) } };
        return reply(next);
      }
      case "/oidc/token":
        return reply({ body: { id_token: unsignedJwt({ iss: ORIGIN, aud: "ichor-ui", sub: "olga", nonce }), refresh_token: "rt" } });
      default:
        return reply({ status: 404, body: {} });
    }
  });
});

afterEach(() => vi.unstubAllGlobals());

async function refusalOf(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(SignInError);
    return (e as InstanceType<typeof SignInError>).msg;
  }
  throw new Error("not refused");
}

describe("the in-page sign-in with a second factor", () => {
  it("asks for the code after the password and signs in once a code is accepted", async () => {
    const step = await signIn("olga", "correct-horse");
    expect(step?.factors).toEqual(["totp", "recovery"]);
    expect(storage.getItem("ichor.token"), "no token before the second step").toBeNull();
    expect(posts.map((p) => p.url)).toEqual(["/oidc/login"]);

    factorAnswers.push(
      { status: 401, body: { error: "access_denied", error_description: "The code is incorrect or was used already." } },
      { status: 429, body: { error: "slow_down", error_description: "" }, headers: { "retry-after": "17" } },
    );
    expect(await refusalOf(step!.verify("000000"))).toEqual({ key: "wrongCode", values: undefined });
    expect(await refusalOf(step!.verify("000001"))).toEqual({ key: "tooManyAttempts", values: { seconds: 17 } });
    expect(storage.getItem("ichor.token")).toBeNull();

    await step!.verify(" 123456 ");
    expect(posts.filter((p) => p.url === "/oidc/login/factor").map((p) => p.body)).toEqual([
      { factor_ticket: "f.t.s", code: "000000" },
      { factor_ticket: "f.t.s", code: "000001" },
      { factor_ticket: "f.t.s", code: "123456" },
    ]);
    expect(posts.at(-1)!.url).toBe("/oidc/token");
    expect(storage.getItem("ichor.token")).toContain(".");
    expect(JSON.parse(storage.getItem("ichor.refresh")!).refreshToken).toBe("rt");
  });

  it("says to start again when the step is no longer valid", async () => {
    const step = await signIn("olga", "correct-horse");
    factorAnswers.push({ status: 400, body: { error: "invalid_request",
      error_description: "This sign-in is no longer valid. Start it again from the application." } });
    expect(await refusalOf(step!.verify("123456"))).toEqual({ key: "factorExpired", values: undefined });
  });

  it("refuses an accepted code whose redirect is not this page's request", async () => {
    const step = await signIn("olga", "correct-horse");
    factorAnswers.push({ body: { redirect_uri: `${ORIGIN}/auth/callback?code=c&state=someone-elses` } });
    expect(await refusalOf(step!.verify("123456"))).toEqual({ key: "badState", values: undefined });
    factorAnswers.push({ body: { redirect_uri: "https://evil.test/auth/callback?code=c" } });
    expect(await refusalOf(step!.verify("123456"))).toEqual({ key: "badRedirect", values: undefined });
    expect(storage.getItem("ichor.token")).toBeNull();
  });

  it("signs in at once without a second factor, and refuses a step this page cannot take", async () => {
    loginAnswer = (state) => ({ body: { redirect_uri: redirectFor(state) } });
    expect(await signIn("admin", "correct-horse")).toBeNull();
    expect(storage.getItem("ichor.token")).toContain(".");
    loginAnswer = () => ({ body: { factor_ticket: "f", factors: ["passkey"] } });
    expect(await refusalOf(signIn("admin", "correct-horse"))).toEqual({ key: "factorUnsupported", values: undefined });
    loginAnswer = () => ({ body: { factor_ticket: "f", factors: ["webauthn-someday"] } });
    expect(await refusalOf(signIn("admin", "correct-horse"))).toEqual({ key: "factorUnsupported", values: undefined });
  });

  it("signs in with a passkey: the browser's answer goes with the ticket, a refusal says so", async () => {
    const options = { publicKey: { challenge: "AAEC", rpId: "ichor.test", userVerification: "required",
      allowCredentials: [{ type: "public-key", id: "BwgJ" }] } };
    loginAnswer = () => ({ body: { factor_ticket: "f.t.s", factors: ["passkey", "recovery"], passkey_options: options } });
    const asked: CredentialRequestOptions[] = [];
    const answers: (() => unknown)[] = [
      () => { throw new DOMException("The operation either timed out or was not allowed.", "NotAllowedError"); },
      () => assertion,
      () => assertion,
    ];
    const bytes = (...b: number[]) => new Uint8Array(b).buffer;
    const assertion = {
      id: "BwgJ", rawId: bytes(7, 8, 9), type: "public-key",
      response: { clientDataJSON: bytes(123, 125), authenticatorData: bytes(1, 2), signature: bytes(3, 4), userHandle: bytes(5) },
      getClientExtensionResults: () => ({}),
    };
    vi.stubGlobal("navigator", {
      credentials: {
        get: async (o: CredentialRequestOptions) => {
          asked.push(o);
          return answers.shift()!();
        },
      },
    });
    const step = await signIn("olga", "correct-horse");
    expect(step?.passkey).toBe(true);
    expect(step?.factors).toEqual(["recovery"]);

    // Cancelled in the browser: nothing is sent, the step stays.
    const cancelled = await step!.verifyPasskey().then(() => null, (e: { msg: unknown }) => e.msg);
    expect(cancelled).toEqual({ key: "passkeyCancelled", values: undefined });
    expect(posts.filter((p) => p.url === "/oidc/login/factor")).toEqual([]);
    expect(new Uint8Array(asked[0].publicKey!.challenge as ArrayBuffer)).toEqual(new Uint8Array([0, 1, 2]));
    expect(new Uint8Array(asked[0].publicKey!.allowCredentials![0].id as ArrayBuffer)).toEqual(new Uint8Array([7, 8, 9]));

    // Refused by the issuer (a cloned authenticator reads as a wrong answer).
    factorAnswers.push({ status: 401, body: { error: "access_denied", error_description: "The code is incorrect or was used already." } });
    expect(await refusalOf(step!.verifyPasskey())).toEqual({ key: "passkeyRefused", values: undefined });
    expect(storage.getItem("ichor.token")).toBeNull();

    await step!.verifyPasskey();
    const sent = posts.filter((p) => p.url === "/oidc/login/factor").map((p) => p.body);
    const credential = { id: "BwgJ", rawId: "BwgJ", type: "public-key", clientExtensionResults: {},
      response: { clientDataJSON: "e30", authenticatorData: "AQI", signature: "AwQ", userHandle: "BQ" } };
    expect(sent).toEqual([{ factor_ticket: "f.t.s", credential }, { factor_ticket: "f.t.s", credential }]);
    expect(storage.getItem("ichor.token")).toContain(".");
  });

  it("hands the second step on after a password change", async () => {
    storage.setItem("ichor.token", unsignedJwt({ sub: "olga" }));
    const again = await signInAgain("new-password-123");
    expect(typeof again).toBe("object");
    expect(storage.getItem("ichor.token"), "the revoked token is dropped").toBeNull();
    expect(posts[0].body).toEqual({ ticket: "login-ticket", username: "olga", password: "new-password-123" });
  });
});

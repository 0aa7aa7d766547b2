// Passkeys (WebAuthn) between the issuer's JSON and the browser's API (docs/mfa.md): the issuer
// sends PublicKeyCredentialCreationOptions and PublicKeyCredentialRequestOptions as JSON
// (`{"publicKey":{…}}`, binary fields base64url without padding), the browser wants them with
// ArrayBuffers, and its answer (a PublicKeyCredential) goes back as JSON again, binary fields
// base64url without padding, as `PublicKeyCredential.toJSON()` writes it where the browser has it.
// Pure, apart from `passkeysAvailable`, `createPasskey` and `getPasskey`, which call the browser.

import { msg, type Msg } from "../strings";

/** The longest passkey name the issuer takes (characters). */
export const PASSKEY_NAME_MAX = 64;

/** A refusal of the browser or the authenticator, with the message to show. */
export class PasskeyError extends Error {
  constructor(readonly msg: Msg) {
    super(msg.key);
  }
}

/** The bytes of a base64url text (padded or not); throws on other characters. */
export function fromBase64url(text: string): Uint8Array<ArrayBuffer> {
  if (!/^[A-Za-z0-9_-]*={0,2}$/.test(text)) throw new Error("not base64url");
  const b64 = text.replace(/=+$/, "").replace(/-/g, "+").replace(/_/g, "/");
  if (b64.length % 4 === 1) throw new Error("not base64url");
  const bin = atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4));
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** `bytes` as base64url without padding. */
export function toBase64url(bytes: ArrayBuffer | ArrayBufferView): string {
  const view = bytes instanceof ArrayBuffer ? new Uint8Array(bytes) : new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let bin = "";
  for (const b of view) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/** The `publicKey` member of the issuer's options; throws when the options are not of that shape. */
function publicKeyOf(options: unknown): Json {
  const pk = isObject(options) ? options.publicKey : undefined;
  if (!isObject(pk) || typeof pk.challenge !== "string") throw new Error("not WebAuthn options");
  return pk;
}

/** A credential descriptor list with its ids decoded. */
function descriptors(list: unknown): PublicKeyCredentialDescriptor[] | undefined {
  if (list === undefined || list === null) return undefined;
  if (!Array.isArray(list)) throw new Error("not a credential list");
  return list.map((d) => {
    if (!isObject(d) || typeof d.id !== "string") throw new Error("not a credential descriptor");
    return { ...d, id: fromBase64url(d.id) } as unknown as PublicKeyCredentialDescriptor;
  });
}

/**
 * The options for `navigator.credentials.create` from the issuer's JSON (challenge, user id and
 * the excluded credentials' ids decoded); throws when they are not of that shape.
 */
export function creationOptions(options: unknown): CredentialCreationOptions {
  const pk = publicKeyOf(options);
  const user = pk.user;
  if (!isObject(user) || typeof user.id !== "string") throw new Error("not WebAuthn creation options");
  const publicKey = {
    ...pk,
    challenge: fromBase64url(pk.challenge as string),
    user: { ...user, id: fromBase64url(user.id) },
  } as unknown as PublicKeyCredentialCreationOptions;
  const exclude = descriptors(pk.excludeCredentials);
  if (exclude) publicKey.excludeCredentials = exclude;
  return { publicKey };
}

/**
 * The options for `navigator.credentials.get` from the issuer's JSON (challenge and the allowed
 * credentials' ids decoded); throws when they are not of that shape.
 */
export function requestOptions(options: unknown): CredentialRequestOptions {
  const pk = publicKeyOf(options);
  const publicKey = { ...pk, challenge: fromBase64url(pk.challenge as string) } as unknown as PublicKeyCredentialRequestOptions;
  const allow = descriptors(pk.allowCredentials);
  if (allow) publicKey.allowCredentials = allow;
  return { publicKey };
}

/** Whether `options` are request options this page can hand the browser. */
export function isRequestOptions(options: unknown): boolean {
  try {
    requestOptions(options);
    return true;
  } catch {
    return false;
  }
}

/** The parts of a PublicKeyCredential the encoding reads (a browser's, or a test's). */
export interface CredentialLike {
  id: string;
  rawId: ArrayBuffer;
  type: string;
  response: {
    clientDataJSON: ArrayBuffer;
    attestationObject?: ArrayBuffer;
    getTransports?: () => string[];
    authenticatorData?: ArrayBuffer;
    signature?: ArrayBuffer;
    userHandle?: ArrayBuffer | null;
  };
  getClientExtensionResults?: () => AuthenticationExtensionsClientOutputs;
  toJSON?: () => unknown;
}

/** Client extension results as JSON: only plain values (no binary output is asked for). */
function extensionResults(c: CredentialLike): Json {
  const raw = c.getClientExtensionResults?.() ?? {};
  const out: Json = {};
  for (const [k, v] of Object.entries(raw)) {
    if (v instanceof ArrayBuffer || ArrayBuffer.isView(v)) continue;
    out[k] = v;
  }
  return out;
}

/**
 * The browser's answer as the issuer reads it: `toJSON()` where the browser has it, else the
 * same shape written here (a registration's attestation object and transports, or an assertion's
 * authenticator data, signature and user handle; binary fields base64url without padding).
 */
export function credentialJson(c: CredentialLike): Json {
  if (typeof c.toJSON === "function") {
    const j = c.toJSON();
    if (isObject(j)) return j;
  }
  const r = c.response;
  const response: Json = { clientDataJSON: toBase64url(r.clientDataJSON) };
  if (r.attestationObject) {
    response.attestationObject = toBase64url(r.attestationObject);
    const transports = r.getTransports?.();
    if (transports) response.transports = transports;
  } else {
    if (!r.authenticatorData || !r.signature) throw new Error("not a WebAuthn answer");
    response.authenticatorData = toBase64url(r.authenticatorData);
    response.signature = toBase64url(r.signature);
    if (r.userHandle) response.userHandle = toBase64url(r.userHandle);
  }
  return { id: c.id, rawId: toBase64url(c.rawId), type: c.type, response, clientExtensionResults: extensionResults(c) };
}

/** Why the browser's WebAuthn call failed (a DOMException's name), as a message to show. */
export function browserRefusal(name: string, registering: boolean): Msg {
  switch (name) {
    // Cancelled, timed out, or no passkey of this site on the device.
    case "NotAllowedError":
    case "AbortError":
      return msg(registering ? "passkeyCreateCancelled" : "passkeyCancelled");
    // excludeCredentials matched: this authenticator holds a passkey of the user already.
    case "InvalidStateError":
      return msg(registering ? "passkeyExists" : "passkeyFailed");
    case "SecurityError":
      return msg("passkeyWrongSite");
    case "NotSupportedError":
      return msg("passkeyUnsupported");
    default:
      return msg("passkeyFailed");
  }
}

/** The check of a passkey's name: 1 to 64 characters of printable text (trimmed). */
export function checkPasskeyName(name: string): Msg | null {
  const n = name.trim();
  if (n === "") return msg("enterPasskeyName");
  if ([...n].length > PASSKEY_NAME_MAX) return msg("passkeyNameTooLong", { max: PASSKEY_NAME_MAX });
  if (/[\p{Cc}\p{Cf}\p{Co}\p{Cn}]/u.test(n)) return msg("passkeyNamePrintable");
  return null;
}

/** Whether this page can use passkeys at all (a secure context with WebAuthn). */
export function passkeysAvailable(): boolean {
  return typeof window !== "undefined" && window.isSecureContext && typeof window.PublicKeyCredential === "function";
}

const errorName = (e: unknown) => (e instanceof DOMException || e instanceof Error ? e.name : "");

/** Makes a passkey with the issuer's creation options; its answer as JSON text. */
export async function createPasskey(options: unknown): Promise<string> {
  let decoded: CredentialCreationOptions;
  try {
    decoded = creationOptions(options);
  } catch {
    throw new PasskeyError(msg("passkeyFailed"));
  }
  let c: Credential | null;
  try {
    c = await navigator.credentials.create(decoded);
  } catch (e) {
    throw new PasskeyError(browserRefusal(errorName(e), true));
  }
  if (!c) throw new PasskeyError(msg("passkeyCreateCancelled"));
  return JSON.stringify(credentialJson(c as unknown as CredentialLike));
}

/** Signs the issuer's challenge with a passkey; its answer as a JSON object. */
export async function getPasskey(options: unknown): Promise<Json> {
  let decoded: CredentialRequestOptions;
  try {
    decoded = requestOptions(options);
  } catch {
    throw new PasskeyError(msg("passkeyFailed"));
  }
  let c: Credential | null;
  try {
    c = await navigator.credentials.get(decoded);
  } catch (e) {
    throw new PasskeyError(browserRefusal(errorName(e), false));
  }
  if (!c) throw new PasskeyError(msg("passkeyCancelled"));
  return credentialJson(c as unknown as CredentialLike);
}

// The UserService over gRPC-web on this origin. Every call carries the ID token; a call refused
// as unauthenticated is retried once after a refresh.

import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { UserService } from "../gen/ichor/v1alpha1/user_pb";
import { session } from "./session";
import { apiRefusal } from "./refusal";
import type { Msg } from "../strings";

const bearer: Interceptor = (next) => async (req) => {
  const token = await session.validToken();
  if (token) req.header.set("authorization", `Bearer ${token}`);
  try {
    return await next(req);
  } catch (e) {
    if (ConnectError.from(e).code !== Code.Unauthenticated || !session.refresh()) throw e;
    const fresh = await session.refreshNow();
    if (!fresh) throw e;
    req.header.set("authorization", `Bearer ${fresh}`);
    return await next(req);
  }
};

export const api = createClient(
  UserService,
  createGrpcWebTransport({ baseUrl: typeof location === "undefined" ? "/" : location.origin, interceptors: [bearer] }),
);

/** A refused call as a message of the catalogs (the server's sentence, recognised). */
export function refusal(e: unknown): Msg {
  const c = ConnectError.from(e);
  return apiRefusal(c.code, c.rawMessage);
}

/** Whether a call was refused because the caller is not signed in. */
export function isUnauthenticated(e: unknown): boolean {
  return ConnectError.from(e).code === Code.Unauthenticated;
}

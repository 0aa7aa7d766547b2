// The UserService over gRPC-web on this origin. Every call carries the ID token; a call refused
// as unauthenticated is retried once after a refresh.

import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { UserService } from "../gen/ichor/v1alpha1/user_pb";
import { session } from "./session";

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

/** The server's message of a refused call. */
export function message(e: unknown): string {
  return ConnectError.from(e).rawMessage;
}

/** Whether a call was refused because the caller is not signed in. */
export function isUnauthenticated(e: unknown): boolean {
  return ConnectError.from(e).code === Code.Unauthenticated;
}

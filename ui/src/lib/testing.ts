// Test helpers shared by the unit tests (imported only by *.test.ts, so never in the bundle).

/** A compact JWS with `claims` and an `alg` header whose signature is not checked by the code under test. */
export function unsignedJwt(claims: object, alg = "none"): string {
  const b64url = (o: object) => btoa(JSON.stringify(o)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  return `${b64url({ alg })}.${b64url(claims)}.sig`;
}

/** `Storage` in memory, standing in for localStorage and sessionStorage. */
export class MemoryStorage implements Storage {
  private m = new Map<string, string>();
  get length() { return this.m.size; }
  clear() { this.m.clear(); }
  getItem(k: string) { return this.m.get(k) ?? null; }
  key(i: number) { return [...this.m.keys()][i] ?? null; }
  removeItem(k: string) { this.m.delete(k); }
  setItem(k: string, v: string) { this.m.set(k, v); }
}

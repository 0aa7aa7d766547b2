import { describe, expect, it } from "vitest";
import {
  MIN_REFRESH_INTERVAL_MS, RETRY_MS, aheadMs, nearEnd, nextRefreshInMs, refreshBeforeUse, refreshOnVisible, refreshOutcome,
} from "./policy";

const NOW = 1_800_000_000_000;
const min = 60_000;
/** A token issued `age` ms before NOW that lives `life` ms. */
const token = (life: number, age = 0) => ({ issuedAt: NOW - age, expiresAt: NOW - age + life });

describe("the refresh schedule", () => {
  it("refreshes a five-minute token a minute before its end", () => {
    expect(aheadMs(token(5 * min))).toBe(min);
    expect(nextRefreshInMs(token(5 * min), NOW)).toBe(4 * min);
  });
  it("refreshes a token of under three minutes a third of its life before its end", () => {
    expect(aheadMs(token(min))).toBe(20_000);
    expect(nextRefreshInMs(token(min), NOW)).toBe(40_000);
    expect(aheadMs(token(2 * min))).toBe(40_000);
    // Three minutes exactly is no longer short: a minute ahead.
    expect(aheadMs(token(3 * min))).toBe(min);
  });
  it("never schedules a refresh sooner than ten seconds from now", () => {
    expect(nextRefreshInMs(token(5 * min, 4 * min + 55_000), NOW)).toBe(MIN_REFRESH_INTERVAL_MS);
    expect(nextRefreshInMs(token(5 * min, 10 * min), NOW)).toBe(MIN_REFRESH_INTERVAL_MS);
    expect(nextRefreshInMs(token(12_000), NOW)).toBe(MIN_REFRESH_INTERVAL_MS);
  });
  it("is computed from the token and now, so each new token reschedules it", () => {
    const first = token(5 * min, 2 * min);
    expect(nextRefreshInMs(first, NOW)).toBe(2 * min);
    expect(nextRefreshInMs(token(5 * min), NOW)).toBe(4 * min);
  });
});

describe("a refresh's answer", () => {
  it("ends the session on 400, 401 and 403", () => {
    for (const s of [400, 401, 403]) expect(refreshOutcome(s), String(s)).toBe("end");
  });
  it("keeps the session and retries on a network failure, a 5xx and a 429", () => {
    for (const s of ["network", 500, 502, 503, 504, 429] as const) expect(refreshOutcome(s), String(s)).toBe("retry");
    expect(RETRY_MS).toBe(15_000);
  });
  it("stores a 200", () => {
    expect(refreshOutcome(200)).toBe("store");
  });
});

describe("a tab that becomes visible", () => {
  it("refreshes at once when its token is near its end or past it", () => {
    expect(refreshOnVisible(token(5 * min, 4 * min + 1), NOW)).toBe(true);
    expect(refreshOnVisible(token(5 * min, 30 * min), NOW)).toBe(true);
    expect(refreshOnVisible(token(min, 41_000), NOW)).toBe(true);
  });
  it("does not refresh a token far from its end", () => {
    expect(refreshOnVisible(token(5 * min, 3 * min), NOW)).toBe(false);
    expect(refreshOnVisible(token(min, 30_000), NOW)).toBe(false);
  });
  it("agrees with nearEnd, and a request waits for a refresh only in the last half of the window", () => {
    expect(nearEnd(token(5 * min, 4 * min + 10_000), NOW)).toBe(true);
    expect(refreshBeforeUse(token(5 * min, 4 * min + 10_000), NOW)).toBe(false);
    expect(refreshBeforeUse(token(5 * min, 4 * min + 31_000), NOW)).toBe(true);
  });
});

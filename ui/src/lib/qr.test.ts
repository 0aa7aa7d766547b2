import { describe, expect, it } from "vitest";
import decodeQR from "qr/decode.js";
import { QUIET_ZONE, modulesPath, qrDrawing, type QrDrawing } from "./qr";

/** The dark cells a path of `modulesPath` draws, as "x,y" strings. */
function cells(path: string): Set<string> {
  const out = new Set<string>();
  for (const m of path.matchAll(/M(\d+) (\d+)h(\d+)v1h-(\d+)z/g)) {
    const [x, y, w, back] = m.slice(1).map(Number);
    expect(back).toBe(w);
    for (let i = 0; i < w; i++) out.add(`${x + i},${y}`);
  }
  return out;
}

/** The drawing as an RGBA image, `scale` pixels a module: what a phone's camera would see. */
function raster(d: QrDrawing, scale: number): { width: number; height: number; data: Uint8Array } {
  const side = d.side * scale;
  const data = new Uint8Array(side * side * 4).fill(255);
  for (const c of cells(d.path)) {
    const [x, y] = c.split(",").map(Number);
    for (let dy = 0; dy < scale; dy++) {
      for (let dx = 0; dx < scale; dx++) {
        const at = ((y * scale + dy) * side + x * scale + dx) * 4;
        data[at] = data[at + 1] = data[at + 2] = 0;
      }
    }
  }
  return { width: side, height: side, data };
}

describe("the QR code's drawing", () => {
  it("draws one rectangle per run of dark modules, offset by the border", () => {
    const modules = [
      [true, true, false, true],
      [false, false, false, false],
      [false, true, true, true],
    ];
    expect(modulesPath(modules, 4)).toBe("M4 4h2v1h-2zM7 4h1v1h-1zM5 6h3v1h-3z");
    expect(modulesPath([[false]], 0)).toBe("");
  });

  it("draws an otpauth URI as a QR code with its three finder patterns and the quiet zone", () => {
    const uri = "otpauth://totp/Ichor:admin?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&issuer=Ichor";
    const d = qrDrawing(uri);
    const size = d.side - 2 * QUIET_ZONE;
    // A version v code is 17 + 4v modules wide; this URI needs a small version at level M.
    expect((size - 17) % 4).toBe(0);
    expect(size).toBeGreaterThanOrEqual(29);
    expect(size).toBeLessThanOrEqual(45);
    const dark = cells(d.path);
    const isDark = (x: number, y: number) => dark.has(`${x + QUIET_ZONE},${y + QUIET_ZONE}`);
    // Each finder: a dark 7×7 ring, a light ring, a dark 3×3 centre; a light separator outside.
    for (const [ox, oy] of [[0, 0], [size - 7, 0], [0, size - 7]]) {
      for (let y = 0; y < 7; y++) {
        for (let x = 0; x < 7; x++) {
          const ring = Math.max(Math.abs(x - 3), Math.abs(y - 3));
          expect(isDark(ox + x, oy + y), `finder at ${ox},${oy}: ${x},${y}`).toBe(ring !== 2);
        }
      }
    }
    // Nothing is drawn in the quiet zone.
    for (const c of dark) {
      const [x, y] = c.split(",").map(Number);
      expect(x >= QUIET_ZONE && y >= QUIET_ZONE && x < d.side - QUIET_ZONE && y < d.side - QUIET_ZONE, c).toBe(true);
    }
    // A QR reader (another library than the encoder) reads the URI back from the drawing.
    expect(decodeQR(raster(d, 6))).toBe(uri);
    // The same text draws the same code; another text another.
    expect(qrDrawing(uri).path).toBe(d.path);
    expect(qrDrawing(`${uri}x`).path).not.toBe(d.path);
  });
});

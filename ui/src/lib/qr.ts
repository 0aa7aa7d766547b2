// The QR code of an authenticator app's `otpauth://` URI, drawn as one SVG path: the modules come
// from `uqr` (a port of Project Nayuki's QR Code generator, no dependencies), the drawing is ours
// so that no markup string, inline style or data: URL reaches the page (the CSP allows none).

import { encode } from "uqr";

/** The quiet zone around the code, in modules (the standard's minimum is 4). */
export const QUIET_ZONE = 4;

/** A QR code ready to draw: the SVG `viewBox` side and the `d` of the path of its dark modules. */
export interface QrDrawing {
  side: number;
  path: string;
}

/**
 * The path of the dark modules of `modules` (rows of booleans, true = dark), offset by `border`
 * modules: one rectangle per horizontal run, so a code of version 10 stays a few kilobytes.
 */
export function modulesPath(modules: readonly (readonly boolean[])[], border: number): string {
  const parts: string[] = [];
  modules.forEach((row, y) => {
    let x = 0;
    while (x < row.length) {
      if (!row[x]) {
        x++;
        continue;
      }
      let end = x;
      while (end < row.length && row[end]) end++;
      parts.push(`M${x + border} ${y + border}h${end - x}v1h-${end - x}z`);
      x = end;
    }
  });
  return parts.join("");
}

/**
 * The drawing of `text` as a QR code at error-correction level M (the level authenticator apps
 * are shown; the URI fits a small version), with the quiet zone.
 */
export function qrDrawing(text: string): QrDrawing {
  const qr = encode(text, { ecc: "M", border: 0 });
  return { side: qr.size + 2 * QUIET_ZONE, path: modulesPath(qr.data, QUIET_ZONE) };
}

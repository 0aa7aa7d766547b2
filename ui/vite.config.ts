import { defineConfig } from "vite";
import preact from "@preact/preset-vite";

// The built files are served by the issuer from ui/dist (issuer/src/ui.rs): hashed files under
// /assets/ (cached for a year), index.html uncached. No inline script, so the issuer's CSP
// `script-src 'self'` holds.
export default defineConfig({
  plugins: [preact()],
  build: {
    outDir: "dist",
    assetsDir: "assets",
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
  },
  test: {
    include: ["src/**/*.test.ts"],
    environment: "node",
  },
});

import { defineConfig } from "vite";
import preact from "@preact/preset-vite";

// The built files (ui/dist) are committed and embedded in the issuer binary at compile time
// (issuer/build.rs, issuer/src/ui.rs): hashed files under /assets/ (cached for a year),
// index.html uncached. No inline script, so the issuer's CSP `script-src 'self'` holds. The build
// is deterministic (content hashes only, no timestamps or absolute paths), so rebuilding unchanged
// sources leaves ui/dist unchanged; hack/ui/test.sh fails when the committed build is stale.
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

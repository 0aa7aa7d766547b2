import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";
import preact from "@preact/preset-vite";

// The built files (ui/dist) are committed and embedded in the issuer binary at compile time
// (issuer/build.rs, issuer/src/ui.rs): hashed files under /assets/ (cached for a year),
// index.html uncached. No inline script, so the issuer's CSP `script-src 'self'` holds. The build
// is deterministic (content hashes only, no timestamps or absolute paths), so rebuilding unchanged
// sources leaves ui/dist unchanged; hack/ui/test.sh fails when the committed build is stale.
// Two pages: the SPA (index.html) and the issuer's sign-in page for the redirect flow
// (login.html, served at /oidc/login with the ticket in a JSON block; issuer/src/oidc/page.rs).
export default defineConfig({
  plugins: [preact()],
  build: {
    outDir: "dist",
    assetsDir: "assets",
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    rolldownOptions: {
      input: {
        index: fileURLToPath(new URL("./index.html", import.meta.url)),
        login: fileURLToPath(new URL("./login.html", import.meta.url)),
      },
    },
  },
  test: {
    include: ["src/**/*.test.ts"],
    environment: "node",
  },
});

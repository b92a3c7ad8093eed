import { defineConfig } from "vite";

// The build lands in ../dist, which the Go package embeds (go:embed). The
// output is committed; internal/web's TestCommittedAssetsMatchBuild checks
// it matches a fresh build.
export default defineConfig({
  base: "/",
  build: {
    outDir: "../dist",
    emptyOutDir: true,
    // One hashed script and stylesheet; no source maps in the binary.
    sourcemap: false,
    modulePreload: { polyfill: false },
  },
});

import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

/** `npm run build:console` (and npm install's prepare): console/ -> console/dist, served by berth serve at /. */
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/',
  // Preact's automatic JSX runtime: no React, no plugin.
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    // The Content-Security-Policy allows no inline script or style: everything is a file.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
  },
  // No request leaves the machine: nothing is fetched at build time, and the bundle names no other origin.
  server: { host: '127.0.0.1' },
});

/**
 * `npm install`'s prepare step: builds the web console when Vite is installed. A production install
 * (`npm install --omit=dev`) has no Vite; the server then runs without the console (it says so at `/`)
 * instead of the whole install failing.
 */
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
let hasVite = true;
try {
  require.resolve('vite/package.json');
} catch {
  hasVite = false;
}
if (!hasVite) {
  console.warn(
    'berth: the web console is not built (Vite, a dev dependency, is not installed); the API works without it. Install with dev dependencies, or run `npm run build:console` where Vite is, to have it.',
  );
  process.exit(0);
}
const built = spawnSync('npm', ['run', 'build:console'], { stdio: 'inherit' });
process.exit(built.status ?? 1);

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';

// In a process of its own: this one may have loaded PGlite already.
test('loading the server does not load PGlite: only opening an embedded database does', () => {
  const script = `
    import { registerHooks } from 'node:module';
    const loaded = new Set();
    registerHooks({ resolve(specifier, context, next) { const r = next(specifier, context); loaded.add(r.url); return r; } });
    await import(${JSON.stringify(new URL('../runtime.ts', import.meta.url).href)});
    console.log(JSON.stringify([...loaded].filter((url) => url.includes('@electric-sql/pglite'))));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.deepEqual(JSON.parse(out), []);
});

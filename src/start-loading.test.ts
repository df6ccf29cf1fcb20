import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';

// In a process of its own: this one may have loaded them already.
test("loading berth serve does not load what only a git delivery, a GitHub App's token or a single sign-on needs", () => {
  const script = `
    import { registerHooks } from 'node:module';
    const loaded = new Set();
    registerHooks({ resolve(specifier, context, next) { const r = next(specifier, context); loaded.add(r.url); return r; } });
    await import(${JSON.stringify(new URL('./cli/processes.ts', import.meta.url).href)});
    console.log(JSON.stringify([...loaded].filter((url) => /\\/typebox\\/build\\/value\\/|\\/(jose|openid-client)\\//.test(url))));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.deepEqual(JSON.parse(out), []);
});

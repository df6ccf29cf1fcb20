import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { builtinModules } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

/**
 * `npm install --omit=dev` installs only `dependencies`: every package the server and the CLI import
 * at run time must be one of them, or a production install fails at its first start (as it once did
 * with eventsource-parser, a dev dependency that `berth logs` imported).
 */
const root = path.resolve(import.meta.dirname, '../..');
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
  scripts: Record<string, string>;
};

function runtimeFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true, recursive: true }).flatMap((entry) => {
    const file = path.join(entry.parentPath, entry.name);
    return entry.isFile() && /\.(ts|js)$/.test(entry.name) && !entry.name.endsWith('.test.ts') ? [file] : [];
  });
}

function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? `${parts[0]}/${parts[1]}` : (parts[0] as string);
}

test('every package the server and CLI import at run time is a production dependency', () => {
  const files = [...runtimeFiles(path.join(root, 'src')), ...runtimeFiles(path.join(root, 'bin'))];
  assert.ok(files.length > 100, `found the sources (${files.length} files)`);
  const imports = /(?:^|\s)(?:import|export)\s[^'"]*?from\s+'([^'.][^']*)'|import\(\s*'([^'.][^']*)'\s*\)/gm;
  const missing = new Set<string>();
  let seen = 0;
  for (const file of files) {
    const text = fs.readFileSync(file, 'utf8');
    for (const match of text.matchAll(imports)) {
      const specifier = (match[1] ?? match[2]) as string;
      if (specifier.startsWith('node:') || builtinModules.includes(specifier)) continue;
      seen++;
      const name = packageOf(specifier);
      if (!pkg.dependencies[name]) missing.add(`${name} (${path.relative(root, file)})`);
    }
  }
  assert.ok(seen > 20, `found the package imports (${seen})`);
  assert.deepEqual([...missing], [], 'imported at run time but not in package.json dependencies');
});

test('a production install (no Vite) skips the console build with a note instead of failing', () => {
  // The script alone in a folder with no node_modules: Vite cannot be resolved, as under --omit=dev.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-prepare-'));
  try {
    fs.copyFileSync(path.join(root, 'tools/console/prepare.ts'), path.join(dir, 'prepare.ts'));
    const run = spawnSync(process.execPath, [path.join(dir, 'prepare.ts')], { cwd: dir, encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    assert.match(run.stderr, /the web console is not built \(Vite, a dev dependency, is not installed\)/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  assert.equal(pkg.scripts.prepare, 'node tools/console/prepare.ts');
});

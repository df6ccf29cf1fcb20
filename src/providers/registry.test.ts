import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

/** What `berth serve`, `worker` and `migrate` load (the CLI itself loads it only for them). */
const PROCESSES = fileURLToPath(new URL('../cli/processes.ts', import.meta.url));

/** The CommonJS packages (dockerode and what it brings are CommonJS) loaded by importing `module`. */
function commonJsPackagesLoadedBy(module: string): string[] {
  const script = `
    import { createRequire } from 'node:module';
    await import(${JSON.stringify(module)});
    const names = Object.keys(createRequire(import.meta.url).cache)
      .map((file) => /node_modules\\/((?:@[^/]+\\/)?[^/]+)/.exec(file)?.[1])
      .filter(Boolean);
    console.log(JSON.stringify([...new Set(names)]));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  return JSON.parse(out) as string[];
}

test('the docker driver, Postgres and mail load only when used: starting the server loads no dockerode, gRPC, ssh2, pg or nodemailer', () => {
  const loaded = commonJsPackagesLoadedBy(PROCESSES);
  // Fastify is CommonJS and always loaded: seeing it shows the probe sees the CommonJS cache at all.
  assert.ok(loaded.includes('fastify'), `the probe sees CommonJS packages: ${loaded.join(', ')}`);
  for (const name of ['dockerode', '@grpc/grpc-js', 'ssh2', 'pg', 'nodemailer']) {
    assert.ok(!loaded.includes(name), `${name} was loaded at start`);
  }
});

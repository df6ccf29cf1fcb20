import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { createRepo } from '../../../test/helpers/git.ts';
import { TerminalError } from '../../jobs/errors.ts';
import { checkout, inside } from './git-source.ts';

/** A checkout with links that stay inside and links that leave, next to a "host" directory. */
const top = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'berth-inside-')));
after(() => fs.rmSync(top, { recursive: true, force: true }));
const repo = path.join(top, 'repo');
const host = path.join(top, 'host');
fs.mkdirSync(path.join(repo, 'app', 'deep'), { recursive: true });
fs.mkdirSync(host);
fs.writeFileSync(path.join(host, 'secret.json'), '{"leak":true}');
fs.writeFileSync(path.join(repo, 'app', 'Dockerfile'), 'FROM scratch\n');
const link = (target: string, name: string) => fs.symlinkSync(target, path.join(repo, name));
link(host, 'abs-dir');
link(path.join(host, 'secret.json'), 'abs-file');
link('/nonexistent/nothing.json', 'abs-missing');
link('../host', 'rel-dir');
link('../host/secret.json', 'rel-file');
link('app', 'app-link');
link('app/deep/../Dockerfile', 'dockerfile-link');
link('app-link/deep', 'chain');
link('loop-b', 'loop-a');
link('loop-a', 'loop-b');

const refused = (inner: string, why = 'is outside the repository') =>
  assert.throws(
    () => inside(repo, inner, 'build_context'),
    (error: Error) => {
      assert.equal(error.message, `build_context ${inner} ${why}`);
      return true;
    },
  );

describe('inside', () => {
  test('plain paths resolve inside the checkout', () => {
    assert.equal(inside(repo, 'app', 'build_context'), path.join(repo, 'app'));
    assert.equal(inside(repo, './app/deep/..', 'build_context'), path.join(repo, 'app'));
    assert.equal(inside(repo, '.', 'build_context'), repo);
  });

  test('links that stay inside resolve to their real path', () => {
    assert.equal(inside(repo, 'app-link', 'build_context'), path.join(repo, 'app'));
    assert.equal(inside(repo, 'dockerfile-link', 'x'), path.join(repo, 'app', 'Dockerfile'));
    assert.equal(inside(repo, 'chain/..', 'x'), path.join(repo, 'app'));
  });

  test('paths and links leaving the checkout are refused, without naming or reading the target', () => {
    for (const inner of [
      '..',
      'app/../..',
      '/etc',
      'abs-dir',
      'abs-file',
      'rel-dir',
      'rel-file',
      'abs-dir/x',
    ])
      refused(inner);
  });

  test('a link to a host path that does not exist is refused the same way as one that does', () => {
    refused('abs-missing');
    refused('abs-file');
  });

  test('a link loop is refused', () => {
    refused('loop-a', 'has too many symbolic links');
  });

  test('a missing component gives a path that cannot be opened, even with .. after it', () => {
    const missing = inside(repo, 'nope/../app/Dockerfile', 'x');
    assert.equal(fs.existsSync(missing), false);
    assert.equal(fs.existsSync(inside(repo, 'app/Dockerfile/..', 'x')), false);
  });
});

describe('checkout', () => {
  test('a traversal name is refused before git runs: nothing outside BERTH_GIT_BASE_URL is cloned', async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-traversal-'));
    after(() => fs.rmSync(root, { recursive: true, force: true }));
    await createRepo(root, 'secret-repo', [{ message: 'secret', files: { 'secret.txt': 'leak' } }]);
    fs.mkdirSync(path.join(root, 'base'));
    await createRepo(path.join(root, 'base'), 'acme/app', [{ message: 'app', files: { 'a.txt': 'a' } }]);
    const before = fs.readdirSync(os.tmpdir()).filter((f) => f.startsWith('berth-src-')).length;
    for (const name of ['../secret-repo', 'acme/../../secret-repo', 'acme/-u']) {
      await assert.rejects(
        checkout({ baseUrl: `file://${root}/base/`, repo: name, branch: 'main', commit: '' }),
        (error: Error) => {
          assert.ok(error instanceof TerminalError, 'not retried');
          assert.match(error.message, /^git_repo_full_name must have the form org\/repo/);
          return true;
        },
      );
    }
    // Not even a directory to clone into was made.
    assert.equal(fs.readdirSync(os.tmpdir()).filter((f) => f.startsWith('berth-src-')).length, before);
    // A name inside the base clones as before.
    const ok = await checkout({
      baseUrl: `file://${root}/base/`,
      repo: 'acme/app',
      branch: 'main',
      commit: '',
    });
    assert.equal(fs.readFileSync(path.join(ok.dir, 'a.txt'), 'utf8'), 'a');
    ok.remove();
  });
});

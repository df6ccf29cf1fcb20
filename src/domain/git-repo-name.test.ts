import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isGitRepoName } from './git-repo-name.ts';

test('org/repo and GitLab subgroups are names; traversal, options and odd characters are not', () => {
  for (const name of ['acme/app', 'acme/.github', 'group/sub/repo', 'a_b/c.d-e', 'Acme/App.git'])
    assert.equal(isGitRepoName(name), true, name);
  for (const name of [
    '../secret-repo',
    'acme/../../secret-repo',
    'acme/..',
    './acme',
    'acme/./app',
    'acme/-upload-pack=evil',
    '-acme/app',
    'acme',
    'acme/',
    '/acme/app',
    'acme//app',
    'acme/app?x=1',
    'acme/app#x',
    'acme/a%2e%2e',
    'acme\\..\\x',
    'acme/app name',
  ])
    assert.equal(isGitRepoName(name), false, name);
});

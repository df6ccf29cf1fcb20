import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after } from 'node:test';
import { runBerth } from './process.ts';

/**
 * The developer CLI as a user runs it against a test's server: the real bin with the BERTH_URL and
 * BERTH_TOKEN `target` gives, a temporary HOME of its own (so nothing is read from or left in the
 * caller's config directory; removed after the file's tests), output piped (not a terminal), and none
 * of the caller's other BERTH_* settings.
 */
export function userCli(target: () => { url: string; token: string }) {
  let home: string | undefined;
  after(() => {
    if (home) fs.rmSync(home, { recursive: true, force: true });
  });
  /** Runs `berth <args>` to its end: its exit code and what it printed. */
  const berth = async (args: string[]) => {
    home ??= fs.mkdtempSync(path.join(os.tmpdir(), 'berth-home-'));
    const { url, token } = target();
    const proc = runBerth(args, {
      HOME: home,
      XDG_CONFIG_HOME: '',
      BERTH_URL: url,
      BERTH_TOKEN: token,
      BERTH_CONTEXT: '',
      BERTH_ENV: '',
      NO_COLOR: '1',
    });
    const code = await proc.exited;
    return { code, out: proc.stdout(), err: proc.stderr() };
  };
  /** `berth <args> -o json`, which must succeed: what it printed, parsed. */
  const json = async (args: string[]) => {
    const res = await berth([...args, '-o', 'json']);
    assert.equal(res.code, 0, res.err);
    return JSON.parse(res.out);
  };
  return { berth, json };
}

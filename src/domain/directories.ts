import fs from 'node:fs';
import path from 'node:path';

/**
 * Why the directory `dir` that `setting` names cannot be used: a file stands at it, or at the nearest of
 * its parents that exists (mkdir would fail with a bare EEXIST or ENOTDIR, naming no setting). Undefined
 * when it is a directory or can be made. `hint` follows the first case's reason.
 */
export function notADirectory(setting: string, dir: string, hint = ''): string | undefined {
  let existing = dir;
  while (!fs.existsSync(existing) && path.dirname(existing) !== existing) existing = path.dirname(existing);
  if (fs.statSync(existing).isDirectory()) return undefined;
  return existing === dir
    ? `${setting} ${dir} is not a directory${hint}`
    : `${setting} ${dir} cannot be made: ${existing} is not a directory`;
}

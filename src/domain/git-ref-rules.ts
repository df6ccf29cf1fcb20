/**
 * A branch name as git itself accepts one (`git check-ref-format --branch`), and never one git could
 * read as an option: it reaches `git clone --branch` and `git ls-remote`. The deploy call's preview
 * `branch` and the branches webhooks name are checked with it.
 * @module
 */

/** Characters git refuses in a ref name: spaces, control characters and `~^:?*[\`. */
const REFUSED = /[\s\p{Cc}~^:?*[\\]/u;

export function branchNameError(field: string, name: string): string | null {
  const refused =
    name === '' ||
    name === '@' ||
    name.startsWith('-') ||
    name.startsWith('/') ||
    name.endsWith('/') ||
    name.endsWith('.') ||
    name.endsWith('.lock') ||
    name.includes('..') ||
    name.includes('//') ||
    name.includes('@{') ||
    name.split('/').some((part) => part.startsWith('.')) ||
    REFUSED.test(name);
  return refused
    ? `${field} must be a git branch name: no spaces, control characters or any of ~^:?*[\\, not starting with "-" or ".", no ".." or "@{"`
    : null;
}

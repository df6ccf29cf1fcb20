/**
 * `git_repo_full_name`: `org/repo`, or `group/sub/repo` for GitLab subgroups. Each segment is letters,
 * digits, `.`, `-` and `_`; none is `.` or `..` (the name is appended to BERTH_GIT_BASE_URL, and such a
 * segment would climb out of it) and none starts with `-` (git could read it as an option). Checked at
 * the API and again where the clone URL is built.
 */
const SEGMENT = /^[A-Za-z0-9_.][A-Za-z0-9_.-]*$/;

export const GIT_REPO_NAME_RULE =
  'git_repo_full_name must have the form org/repo (GitLab: group/sub/repo): letters, digits, ".", "-" and "_", ' +
  'no "." or ".." segment and no segment starting with "-"';

export function isGitRepoName(name: string): boolean {
  const segments = name.split('/');
  return (
    segments.length >= 2 &&
    segments.every((segment) => SEGMENT.test(segment) && segment !== '.' && segment !== '..')
  );
}

import { ApiError, UnreachableError } from '../../client/index.ts';
import { CliError, EXIT, exitCodeOfAnswer } from './errors.ts';

/** A 401's message names no cause: say which token was refused and what to do about it. */
function unauthorizedHint(env = process.env): string {
  return env.BERTH_TOKEN
    ? '\n  BERTH_TOKEN was refused (wrong, revoked or expired): set a valid one'
    : '\n  the token was refused (wrong, revoked or expired): run berth login with a valid one';
}

/** The API's message and its field errors, one per line, and the matching exit code. */
export function cliErrorOf(error: unknown): CliError | undefined {
  if (error instanceof CliError) return error;
  if (error instanceof ApiError) {
    const code = error.body.error_code ? `${error.body.error_code}: ` : '';
    const fields = (error.body.errors ?? []).map((e) => `\n  ${e.field}: ${e.error}`).join('');
    const hint = error.status === 401 ? unauthorizedHint() : '';
    return new CliError(
      `${code}${error.message}${fields}${hint}`,
      exitCodeOfAnswer(error.status, error.body.error_code),
    );
  }
  if (error instanceof UnreachableError) return new CliError(error.message, EXIT.unexpected);
  return undefined;
}

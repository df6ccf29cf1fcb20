import { ApiError, UnreachableError } from '../../client/index.ts';

/** The exit codes of the developer commands (README "Exit codes"). */
export const EXIT = {
  ok: 0,
  /** Unexpected: a bug, an unreachable server, a 5xx. */
  unexpected: 1,
  /** The command line is wrong, or something it needs is not set up (no context, no environment). */
  usage: 2,
  /** 401 or 403: not logged in, a bad token, or no plan for this. */
  auth: 3,
  notFound: 4,
  /** 422, or the API's `validation` error code. */
  validation: 5,
  /** 409, or a conditional write that kept meeting newer changes. */
  conflict: 6,
  deploymentFailed: 7,
} as const;

/** An error for the user: one message (maybe several lines) and the exit code that says what failed. */
export class CliError extends Error {
  readonly isUserError = true;
  readonly exitCode: number;
  constructor(message: string, exitCode: number) {
    super(message);
    this.exitCode = exitCode;
  }
}

function exitCodeOf(error: ApiError): number {
  if (error.status === 401 || error.status === 403) return EXIT.auth;
  if (error.status === 404) return EXIT.notFound;
  if (error.status === 422 || error.body.error_code === 'validation') return EXIT.validation;
  if (error.status === 409 || error.status === 412) return EXIT.conflict;
  return EXIT.unexpected;
}

/** The API's message and its field errors, one per line, and the matching exit code. */
export function cliErrorOf(error: unknown): CliError | undefined {
  if (error instanceof CliError) return error;
  if (error instanceof ApiError) {
    const code = error.body.error_code ? `${error.body.error_code}: ` : '';
    const fields = (error.body.errors ?? []).map((e) => `\n  ${e.field}: ${e.error}`).join('');
    return new CliError(`${code}${error.message}${fields}`, exitCodeOf(error));
  }
  if (error instanceof UnreachableError) return new CliError(error.message, EXIT.unexpected);
  return undefined;
}

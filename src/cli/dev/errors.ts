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

/** The exit code of an API's error answer (the same for the developer and the admin commands). */
export function exitCodeOfAnswer(status: number, errorCode: string | undefined): number {
  if (status === 401 || status === 403) return EXIT.auth;
  if (status === 404) return EXIT.notFound;
  if (status === 422 || errorCode === 'validation') return EXIT.validation;
  if (status === 409 || status === 412) return EXIT.conflict;
  return EXIT.unexpected;
}

/** An error for the user: one message (maybe several lines) and the exit code that says what failed. */
export class CliError extends Error {
  readonly isUserError = true;
  readonly exitCode: number;
  constructor(message: string, exitCode: number) {
    super(message);
    this.exitCode = exitCode;
  }
}

/** Characters no HTTP header value may hold: fetch would refuse the token, echoing it whole in its error. */
const NOT_IN_A_HEADER = /[^\t\x20-\x7e\x80-\xff]/;

/** A token pasted with more than itself (a line break, a JSON answer) is refused without showing it. */
export function refuseUnsendableToken(token: string, what: string): void {
  if (NOT_IN_A_HEADER.test(token)) {
    throw new CliError(
      `${what} holds a line break or another character no token has: give the token alone`,
      EXIT.usage,
    );
  }
}

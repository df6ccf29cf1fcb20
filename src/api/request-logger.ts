import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, Level, LogFn, Logger } from 'pino';

/**
 * A request's logger, made by Fastify for every request: the pino child (which serializes the request
 * id into its bindings) is made only when the request logs at a level that is on. At the usual levels
 * most requests write one line at most (the access line, off below `info`), so a poller's requests skip
 * the child altogether.
 */
class RequestLogger implements FastifyBaseLogger {
  private made: Logger | undefined;
  private readonly parent: Logger;
  private readonly bindings: Bindings;
  private readonly options: ChildLoggerOptions;
  declare fatal: LogFn;
  declare error: LogFn;
  declare warn: LogFn;
  declare info: LogFn;
  declare debug: LogFn;
  declare trace: LogFn;

  constructor(parent: Logger, bindings: Bindings, options: ChildLoggerOptions) {
    this.parent = parent;
    this.bindings = bindings;
    this.options = options;
    // A route with a level of its own: the child decides.
    if (options.level !== undefined) this.made = parent.child(bindings, options);
  }

  get logger(): Logger {
    this.made ??= this.parent.child(this.bindings, this.options);
    return this.made;
  }

  get level(): string {
    return (this.made ?? this.parent).level;
  }

  set level(level: string) {
    this.logger.level = level;
  }

  enabled(level: Level): boolean {
    return (this.made ?? this.parent).isLevelEnabled(level);
  }

  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.logger.child(bindings, options);
  }
}

for (const level of ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const) {
  RequestLogger.prototype[level] = function (this: RequestLogger, ...args: Parameters<LogFn>) {
    if (this.enabled(level)) this.logger[level](...args);
  } as LogFn;
}

/** Fastify's childLoggerFactory: a RequestLogger over the app's pino logger. */
export function requestLoggers(
  logger: FastifyBaseLogger,
  bindings: Bindings,
  options: ChildLoggerOptions,
): FastifyBaseLogger {
  return new RequestLogger(logger as Logger, bindings, options);
}

/**
 * Times the CLI's flags take as a span back from now (`30m`, `2h`, `7d`, `1w`): one grammar and one set
 * of messages for every command (`berth audit --since`, `berth metrics --since`).
 * @module
 */
import { CliError, EXIT } from './errors.ts';

const UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 } as const;

/** A whole number of minutes, hours, days or weeks, in milliseconds; undefined if `value` is no span. */
export function spanMs(value: string): number | undefined {
  const match = /^(\d+)([mhdw])$/.exec(value);
  return match ? Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS] : undefined;
}

/** A flag that takes a span of at least a minute (`--since 1h`), in milliseconds. */
export function durationFlag(flag: string, value: string): number {
  const ms = spanMs(value) ?? 0;
  if (ms < UNIT_MS.m)
    throw new CliError(`${flag} takes a duration such as 1h, 1d or 1w (got "${value}")`, EXIT.usage);
  return ms;
}

/** A flag that takes an instant as the API does: ISO 8601 as given, or a span back from `now`. */
export function instantFlag(flag: string, value: string | undefined, now = Date.now()): string | undefined {
  if (value === undefined) return undefined;
  const ago = spanMs(value);
  if (ago !== undefined) return new Date(now - ago).toISOString();
  if (Number.isNaN(Date.parse(value))) {
    throw new CliError(
      `${flag} takes an ISO 8601 time (2026-11-28T09:00:00Z) or a span back from now (30m, 2h, 7d); got "${value}"`,
      EXIT.usage,
    );
  }
  return value;
}

import { createRequire } from 'node:module';
import { styleText } from 'node:util';
import { CliError, EXIT } from './errors.ts';
import { yaml } from './yaml.ts';

const require = createRequire(import.meta.url);
/** cli-table3, loaded only to draw a table on a terminal. */
const tables = (): typeof import('cli-table3') => require('cli-table3');

export const FORMATS = ['table', 'json', 'yaml'] as const;
export type Format = (typeof FORMATS)[number];

export interface Column<T> {
  header: string;
  value: (row: T) => unknown;
}

/** What a command prints to stdout; progress and notes go to stderr (notice). */
export interface Output {
  format: Format;
  /** A list: a table, or the rows as JSON / YAML (`raw`, as the API answered). */
  list<T>(rows: T[], columns: Column<T>[], raw?: unknown): void;
  /** One resource: field and value pairs, or the resource as JSON / YAML. */
  item(resource: object, fields?: string[], raw?: unknown): void;
  /** A line for a person, on stderr; nothing with -o json or yaml when stderr is not a terminal either. */
  notice(text: string): void;
}

function cell(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

/** Colour for a state on a terminal; none with NO_COLOR, or when stdout is not a terminal (styleText checks). */
export function stateText(state: string): string {
  if (['success', 'running', 'available', 'active', 'deployed'].includes(state))
    return styleText('green', state);
  if (state.includes('fail') || state === 'deleted') return styleText('red', state);
  return styleText('yellow', state);
}

export function makeOutput(
  format: string | undefined,
  stdout = process.stdout,
  stderr = process.stderr,
): Output {
  const chosen = (format ?? 'table') as Format;
  if (!FORMATS.includes(chosen)) {
    throw new CliError(`-o must be one of ${FORMATS.join(', ')} (got "${format}")`, EXIT.usage);
  }
  const terminal = Boolean(stdout.isTTY);
  const write = (text: string) => stdout.write(text.endsWith('\n') ? text : `${text}\n`);
  const structured = (value: unknown) =>
    write(chosen === 'json' ? JSON.stringify(value, null, 2) : yaml().stringify(value));
  // On a terminal: a table with a bold header. Elsewhere: tab-separated rows, no header, nothing decorative.
  const rowsOut = (header: string[], rows: string[][]) => {
    if (!terminal) {
      for (const row of rows) write(row.join('\t'));
      return;
    }
    const Table = tables();
    const table = new Table({
      head: header.map((h) => styleText('bold', h)),
      style: { head: [], border: [], compact: true, 'padding-left': 0, 'padding-right': 2 },
      chars: {
        top: '',
        'top-mid': '',
        'top-left': '',
        'top-right': '',
        bottom: '',
        'bottom-mid': '',
        'bottom-left': '',
        'bottom-right': '',
        left: '',
        'left-mid': '',
        mid: '',
        'mid-mid': '',
        right: '',
        'right-mid': '',
        middle: '',
      },
    });
    table.push(...rows);
    write(rows.length === 0 ? styleText('dim', '(none)') : table.toString());
  };
  return {
    format: chosen,
    list(rows, columns, raw) {
      if (chosen !== 'table') return structured(raw ?? rows);
      rowsOut(
        columns.map((c) => c.header),
        rows.map((row) => columns.map((c) => cell(c.value(row)))),
      );
    },
    item(resource, fields, raw) {
      if (chosen !== 'table') return structured(raw ?? resource);
      const entries = Object.entries(resource).filter(([k]) => !fields || fields.includes(k));
      const ordered = fields ? fields.flatMap((f) => entries.filter(([k]) => k === f)) : entries;
      if (!terminal) {
        for (const [k, v] of ordered) write(`${k}\t${cell(v)}`);
        return;
      }
      const width = Math.max(...ordered.map(([k]) => k.length));
      for (const [k, v] of ordered) write(`${styleText('bold', k.padEnd(width))}  ${cell(v)}`);
    },
    notice(text) {
      if (chosen === 'table' || stderr.isTTY) stderr.write(`${text}\n`);
    },
  };
}

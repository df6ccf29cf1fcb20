import type { ComponentChildren } from 'preact';
import { TableWrap } from './ui.tsx';

/**
 * A column: its header, and what each row shows under it. An `actions` column holds buttons: its
 * header is for screen readers only, and its cells carry no label when the table stacks on a phone.
 */
export interface Column<T> {
  header: string;
  cell: (row: T) => ComponentChildren;
  actions?: true;
}

/**
 * The console's list: a scrolling region named `label`, one row per item, and on narrow screens each
 * row stacked with its headers as labels (`data-label`). `caption` tells screen readers the order.
 */
export function DataTable<T>(props: {
  label: string;
  caption?: string;
  columns: Column<T>[];
  rows: T[];
  keyOf: (row: T) => string;
}) {
  return (
    <TableWrap label={props.label}>
      <table class="stack">
        <caption class="sr-only">{props.caption ?? props.label}</caption>
        <thead>
          <tr>
            {props.columns.map((c) => (
              <th key={c.header} scope="col">
                {c.actions ? <span class="sr-only">{c.header}</span> : c.header}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {props.rows.map((row) => (
            <tr key={props.keyOf(row)}>
              {props.columns.map((c) =>
                c.actions ? (
                  <td key={c.header}>{c.cell(row)}</td>
                ) : (
                  <td key={c.header} data-label={c.header}>
                    {c.cell(row)}
                  </td>
                ),
              )}
            </tr>
          ))}
        </tbody>
      </table>
    </TableWrap>
  );
}

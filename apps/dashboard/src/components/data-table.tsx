import type { ReactNode } from 'react';

/** A scrollable table, one row per item; `row` gives that row's cells. */
export function DataTable<T extends { id: string }>(props: {
  columns: string[];
  rows: T[];
  row: (item: T) => ReactNode;
  testId?: string;
}) {
  return (
    <div className="table-wrap">
      <table data-testid={props.testId}>
        <thead>
          <tr>
            {props.columns.map((column) => (
              <th key={column}>{column || null}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {props.rows.map((item) => (
            <tr key={item.id}>{props.row(item)}</tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

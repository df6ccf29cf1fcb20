import { ApiError, messageOf } from './api.ts';

/** Above a form: what failed, and each error that has no field of its own on the form. */
export function FormErrors(props: { error: unknown; unplaced?: [string, string][] }) {
  if (!props.error) return null;
  const validation = props.error instanceof ApiError && props.error.status === 422;
  return (
    <div class="error-box" role="alert">
      <p>{validation ? `${messageOf(props.error)}: fix the fields marked below.` : messageOf(props.error)}</p>
      {props.unplaced && props.unplaced.length > 0 && (
        <ul>
          {props.unplaced.map(([field, error]) => (
            <li key={field}>
              <code>{field}</code>: {error}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

/**
 * A field error shown under its field: the API names the field as it is sent (`replica_count is a
 * required field`); under the field, it reads with the label the user sees (`Replicas is a required field`).
 */
export function inLabel(error: string | undefined, field: string, label: string): string | undefined {
  return error?.startsWith(`${field} `) ? `${label} ${error.slice(field.length + 1)}` : error;
}

import type { ComponentChildren } from 'preact';
import { ErrorBox } from './ui.tsx';

/**
 * A question asked before an action that is not undone by a click: what will happen, the action's button
 * (its error beside it), and a way back.
 */
export function Confirm(props: {
  id: string;
  title: string;
  children: ComponentChildren;
  action: string;
  busyAction: string;
  keep: string;
  submit: { busy: boolean; error: unknown; run: () => void };
  onKeep: () => void;
}) {
  return (
    <section class="confirm" aria-labelledby={props.id}>
      <h3 id={props.id}>{props.title}</h3>
      <p>{props.children}</p>
      {props.submit.error !== undefined && <ErrorBox error={props.submit.error} />}
      <div class="form-actions">
        <button type="button" class="danger" onClick={() => props.submit.run()} disabled={props.submit.busy}>
          {props.submit.busy ? props.busyAction : props.action}
        </button>
        <button type="button" onClick={props.onKeep} disabled={props.submit.busy}>
          {props.keep}
        </button>
      </div>
    </section>
  );
}

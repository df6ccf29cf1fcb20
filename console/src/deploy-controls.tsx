import { useState } from 'preact/hooks';
import { api, unwrap } from './api.ts';
import { Confirm } from './confirm.tsx';
import { navigate } from './router.ts';
import type { Deployment, Service } from './types.ts';
import { ErrorBox, useSubmit } from './ui.tsx';

type Recovery = 'restart' | 'rollback';

/**
 * Restart (new replicas of the serving version, the old ones gone once they are healthy) and roll back
 * (the deployment before the serving one again, as it ran), each asked first; the new deployment's
 * page follows it. What the API refuses (nothing deployed yet, nothing to go back to) is said in place.
 */
export function RestartOrRollBack(props: { envId: string; service: Service }) {
  const [asking, setAsking] = useState<Recovery | null>(null);
  const path = { envId: props.envId, serviceId: props.service.id };
  const submit = useSubmit(
    async () =>
      unwrap(
        asking === 'restart'
          ? await api().POST('/v1/environments/{envId}/services/{serviceId}/restart', {
              params: { path },
              body: {},
            })
          : await api().POST('/v1/environments/{envId}/services/{serviceId}/rollback', {
              params: { path },
              body: {},
            }),
      ),
    (accepted) => navigate(`/deployments/${accepted.deployment_id}`),
  );
  const ask = (what: Recovery) => {
    submit.reset();
    setAsking(what);
  };
  const name = props.service.name;
  return (
    <section aria-labelledby="recover-title">
      <h2 id="recover-title">Restart or roll back</h2>
      <div class="form-actions">
        <button type="button" onClick={() => ask('restart')} disabled={submit.busy}>
          Restart
        </button>
        <button type="button" onClick={() => ask('rollback')} disabled={submit.busy}>
          Roll back
        </button>
      </div>
      {asking === 'restart' && (
        <Confirm
          id="confirm-restart-title"
          title={`Restart ${name}?`}
          action={`Restart ${name}`}
          busyAction="Restarting…"
          keep="Cancel"
          submit={submit}
          onKeep={() => setAsking(null)}
        >
          New replicas of the version serving now start; each old one stops once the new ones are healthy.
        </Confirm>
      )}
      {asking === 'rollback' && (
        <Confirm
          id="confirm-rollback-title"
          title={`Roll ${name} back?`}
          action={`Roll ${name} back`}
          busyAction="Rolling back…"
          keep="Cancel"
          submit={submit}
          onKeep={() => setAsking(null)}
        >
          The successful deployment before the one serving now runs again, with its target, ops.json and
          secrets as they were then. The secrets stored now are kept for the next deploy.
        </Confirm>
      )}
    </section>
  );
}

/**
 * On a deployment's page: cancel it while it is on its way (asked first), or run it again once it
 * succeeded (a rollback to it). Its page follows the state the cancel leads to.
 */
export function DeploymentActions(props: { deployment: Deployment }) {
  const d = props.deployment;
  const [asking, setAsking] = useState(false);
  const cancel = useSubmit(
    async () =>
      unwrap(
        await api().POST('/v1/deployments/{deploymentId}/cancel', {
          params: { path: { deploymentId: d.id } },
          body: {},
        }),
      ),
    () => setAsking(false),
  );
  const again = useSubmit(
    async () =>
      unwrap(
        await api().POST('/v1/environments/{envId}/services/{serviceId}/rollback', {
          params: { path: { envId: d.private_instance_id, serviceId: d.service_id } },
          body: { deployment_id: d.id },
        }),
      ),
    (accepted) => navigate(`/deployments/${accepted.deployment_id}`),
  );
  if (d.state === 'success') {
    return (
      <div class="form-actions">
        <button type="button" onClick={() => again.run()} disabled={again.busy}>
          {again.busy ? 'Starting…' : 'Run this version again'}
        </button>
        {again.error !== undefined && <ErrorBox error={again.error} />}
      </div>
    );
  }
  if (d.state === 'failed') return null;
  return asking ? (
    <Confirm
      id="confirm-cancel-title"
      title="Cancel this deployment?"
      action="Cancel the deployment"
      busyAction="Cancelling…"
      keep="Keep it going"
      submit={cancel}
      onKeep={() => setAsking(false)}
    >
      A queued deployment never runs; one in progress stops before traffic moves to it (one that already moved
      traffic finishes). The version serving now keeps serving.
    </Confirm>
  ) : (
    <div class="form-actions">
      <button
        type="button"
        onClick={() => {
          cancel.reset();
          setAsking(true);
        }}
      >
        Cancel deployment
      </button>
    </div>
  );
}

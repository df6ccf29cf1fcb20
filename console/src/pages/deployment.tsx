import { EventSourceParserStream } from 'eventsource-parser/stream';
import { useEffect, useRef, useState } from 'preact/hooks';
import { waitForDeployment } from '../../../src/client/index.ts';
import { ApiError, api, isSignedOut, unwrap } from '../api.ts';
import { DeploymentActions } from '../deploy-controls.tsx';
import { navigate } from '../router.ts';
import { useServiceName } from '../service-name.ts';
import type { Deployment, LogLine } from '../types.ts';
import { ErrorBox, Loading, Page, StateBadge, Time } from '../ui.tsx';
import { targetText } from './service.tsx';

const TERMINAL = ['success', 'failed'];

/**
 * A deployment followed live to its end: its state through waiting reads (`Prefer: wait`: the server
 * answers the moment it changes), its log through the server-sent events of `?follow=true`.
 */
export function DeploymentPage(props: { deploymentId: string }) {
  const { deploymentId } = props;
  const [deployment, setDeployment] = useState<Deployment>();
  const [error, setError] = useState<unknown>();
  const [round, setRound] = useState(0);

  useEffect(() => {
    const abort = new AbortController();
    setError(undefined);
    waitForDeployment(api(), deploymentId, { signal: abort.signal, onChange: setDeployment }).then(
      setDeployment,
      (e) => {
        if (abort.signal.aborted) return;
        if (isSignedOut(e)) navigate('/sign-in');
        else setError(e);
      },
    );
    return () => abort.abort();
  }, [deploymentId, round]);

  const d = deployment;
  const serviceName = useServiceName(d?.private_instance_id, d?.service_id);
  return (
    <Page title={serviceName ? `Deployment of ${serviceName}` : 'Deployment'}>
      {d && (
        <p class="crumbs">
          <a href={`#/envs/${d.private_instance_id}/services/${d.service_id}`}>
            ← {serviceName ?? 'Service'}
          </a>
        </p>
      )}
      {error ? (
        <ErrorBox error={error} onRetry={() => setRound((r) => r + 1)} />
      ) : !d ? (
        <Loading what="the deployment" />
      ) : (
        <dl class="facts" aria-live="polite">
          <dt>State</dt>
          <dd>
            <StateBadge state={d.state} />
            {!TERMINAL.includes(d.state) && <span class="muted"> following live…</span>}
          </dd>
          <dt>Target</dt>
          <dd>
            <code>{targetText(d)}</code>
          </dd>
          <dt>Note</dt>
          <dd>{d.note || '—'}</dd>
          <dt>Started</dt>
          <dd>
            <Time at={d.created_at} />
          </dd>
          {d.failure_reason && (
            <>
              <dt>Why it failed</dt>
              <dd class="field-error">{d.failure_reason}</dd>
            </>
          )}
        </dl>
      )}
      {d && !error && <DeploymentActions deployment={d} />}
      <DeploymentLog deploymentId={deploymentId} />
    </Page>
  );
}

function DeploymentLog(props: { deploymentId: string }) {
  const [lines, setLines] = useState<LogLine[]>([]);
  const [status, setStatus] = useState<'following' | 'ended' | 'lost'>('following');
  const [refused, setRefused] = useState<unknown>();
  const box = useRef<HTMLPreElement>(null);

  useEffect(() => {
    const abort = new AbortController();
    let cursor: string | undefined;
    setLines([]);
    setStatus('following');
    setRefused(undefined);
    const follow = async () => {
      // Resumes after the last line seen when the stream drops: nothing lost, nothing repeated.
      for (let attempt = 0; attempt < 5 && !abort.signal.aborted; attempt++) {
        try {
          const result = await api().GET('/v1/deployments/{deploymentId}/logs', {
            params: {
              path: { deploymentId: props.deploymentId },
              query: { follow: true, ...(cursor && { cursor }) },
            },
            parseAs: 'stream',
            signal: abort.signal,
          });
          if (!result.response.ok || !result.response.body) unwrap(result);
          const events = (result.response.body as ReadableStream<BufferSource>)
            .pipeThrough(new TextDecoderStream())
            .pipeThrough(new EventSourceParserStream());
          for await (const event of events) {
            if (event.event === 'line') {
              const line = JSON.parse(event.data) as LogLine;
              cursor = event.id ?? line.cursor;
              setLines((all) => [...all, line]);
            } else if (event.event === 'end') {
              setStatus('ended');
              return;
            }
          }
        } catch (e) {
          if (abort.signal.aborted) return;
          if (isSignedOut(e)) {
            navigate('/sign-in');
            return;
          }
          // Refused (a viewer may not read logs; a deployment not found): asking again changes nothing.
          if (e instanceof ApiError && e.status >= 400 && e.status < 500 && e.status !== 429) {
            setRefused(e);
            return;
          }
        }
        await new Promise((resolve) => setTimeout(resolve, 1000 * (attempt + 1)));
      }
      if (!abort.signal.aborted) setStatus('lost');
    };
    void follow();
    return () => abort.abort();
  }, [props.deploymentId]);

  useEffect(() => {
    const el = box.current;
    if (el) el.scrollTop = el.scrollHeight;
  }, [lines.length]);

  return (
    <section aria-labelledby="log-title">
      <h2 id="log-title">Log</h2>
      {status === 'lost' && (
        <div class="error-box" role="alert">
          <p>The log stream was lost. Reload the page to follow it again.</p>
        </div>
      )}
      {/* Refused: the reason in place of the log, not an empty box under it. */}
      {refused !== undefined ? (
        <ErrorBox error={refused} />
      ) : (
        // biome-ignore lint/a11y/noNoninteractiveTabindex: the log scrolls: keyboard users must reach it to scroll it
        <pre class="log" ref={box} role="log" tabIndex={0} aria-labelledby="log-title">
          {lines.length === 0 && status === 'following' ? 'Waiting for the first line…' : null}
          {lines.map((l) => (
            <div key={l.cursor}>
              {/* A space after even the longest step (dependencies), so it never runs into the line. */}
              <span class="step">{`${l.step.padEnd(12)} `}</span>
              {l.line}
            </div>
          ))}
          {status === 'ended' && <div class="muted">— end of the deployment —</div>}
        </pre>
      )}
    </section>
  );
}

import './styles.css';
import { Fragment, render } from 'preact';
import { useEffect } from 'preact/hooks';
import { Layout } from './layout.tsx';
import { AuditLog } from './pages/audit-log.tsx';
import { CreateService } from './pages/create-service.tsx';
import { Dependencies } from './pages/dependencies.tsx';
import { DeploymentPage } from './pages/deployment.tsx';
import { DeviceLogin } from './pages/device.tsx';
import { Domains } from './pages/domains.tsx';
import { EnvironmentPage } from './pages/environment.tsx';
import { Environments } from './pages/environments.tsx';
import { People } from './pages/people.tsx';
import { Secrets } from './pages/secrets.tsx';
import { ServicePage } from './pages/service.tsx';
import { SetPassword, SignIn } from './pages/sign-in.tsx';
import { SsoCallback, SsoSettings, ssoCallbackAccount } from './pages/sso.tsx';
import { Tokens } from './pages/tokens.tsx';
import { WebhookDeliveries, Webhooks } from './pages/webhooks.tsx';
import { match, navigate, useRoute } from './router.ts';
import { isSignedIn, rememberReturn } from './session.ts';

/** Each route: its pattern and the page it shows. The first match wins. */
const ROUTES: [string, (p: Record<string, string>) => preact.JSX.Element][] = [
  ['/envs', () => <Environments />],
  ['/envs/:envId', (p) => <EnvironmentPage envId={p.envId as string} />],
  ['/envs/:envId/secrets', (p) => <Secrets envId={p.envId as string} />],
  ['/envs/:envId/services/new', (p) => <CreateService envId={p.envId as string} />],
  [
    '/envs/:envId/services/:serviceId',
    (p) => <ServicePage envId={p.envId as string} serviceId={p.serviceId as string} />,
  ],
  [
    '/envs/:envId/services/:serviceId/secrets',
    (p) => <Secrets envId={p.envId as string} serviceId={p.serviceId as string} />,
  ],
  [
    '/envs/:envId/services/:serviceId/domains',
    (p) => <Domains envId={p.envId as string} serviceId={p.serviceId as string} />,
  ],
  [
    '/envs/:envId/services/:serviceId/dependencies',
    (p) => <Dependencies envId={p.envId as string} serviceId={p.serviceId as string} />,
  ],
  ['/deployments/:deploymentId', (p) => <DeploymentPage deploymentId={p.deploymentId as string} />],
  ['/audit', () => <AuditLog />],
  ['/people', () => <People />],
  ['/device', () => <DeviceLogin />],
  ['/sso', () => <SsoSettings />],
  ['/tokens', () => <Tokens />],
  ['/webhooks', () => <Webhooks />],
  ['/webhooks/:webhookId', (p) => <WebhookDeliveries webhookId={p.webhookId as string} />],
];

function App() {
  const route = useRoute();
  const signedIn = isSignedIn();
  // Reached from a link: open whether or not this tab is signed in.
  const linkPage = route.startsWith('/accept-invitation')
    ? 'invitation'
    : route.startsWith('/sign-in-link')
      ? 'link'
      : null;
  useEffect(() => {
    if (linkPage) return;
    if (!signedIn && route !== '/sign-in') {
      // A berth login link opened signed out: back to it once signed in.
      if (route.startsWith('/device')) rememberReturn(route);
      navigate('/sign-in');
    } else if (signedIn && (route === '/' || route === '/sign-in')) navigate('/envs');
    // A new page: focus its title, so a screen reader and the keyboard start there.
    document.getElementById('page-title')?.focus();
  }, [route, signedIn]);
  if (linkPage) return <SetPassword kind={linkPage} />;
  if (!signedIn || route === '/sign-in') return <SignIn />;
  for (const [pattern, page] of ROUTES) {
    const params = match(pattern, route);
    // Keyed by its path: another service's page starts afresh, not with the last one's forms and data.
    if (params)
      return (
        <Layout>
          <Fragment key={route.split('?')[0]}>{page(params)}</Fragment>
        </Layout>
      );
  }
  return (
    <Layout>
      <h1 id="page-title">Page not found</h1>
      <p>
        Nothing lives at <code>{route}</code>. <a href="#/envs">Go to your environments</a>.
      </p>
    </Layout>
  );
}

// The identity provider sends the browser back to a path of its own (docs/sso.md), not to a #/ route.
const ssoAccount = ssoCallbackAccount();
render(
  ssoAccount ? <SsoCallback accountId={ssoAccount} /> : <App />,
  document.getElementById('app') as HTMLElement,
);

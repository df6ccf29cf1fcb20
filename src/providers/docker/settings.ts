import { intSetting } from '../../config.ts';

/** The docker driver's settings, parsed by the driver from the environment. */
export interface DockerSettings {
  /** BERTH_INGRESS_HOST: host name services live under: `{subdomain}.{ingressHost}`. */
  ingressHost: string;
  /** BERTH_INGRESS_PORT: the ingress's port. */
  ingressPort: number;
  /** BERTH_INGRESS_BIND: the address the ingress listens on, apart from BERTH_HOST, so exposing apps never exposes the API. */
  ingressBind: string;
  /** BERTH_GIT_BASE_URL: where `org/repo` is cloned from. */
  gitBaseUrl: string;
}

export function dockerSettings(env: NodeJS.ProcessEnv): DockerSettings {
  return {
    ingressHost: env.BERTH_INGRESS_HOST || 'localhost',
    ingressPort: intSetting(env, 'BERTH_INGRESS_PORT', 8088, 1, 65535),
    ingressBind: env.BERTH_INGRESS_BIND || '127.0.0.1',
    gitBaseUrl: env.BERTH_GIT_BASE_URL || 'https://github.com/',
  };
}

import { api, unwrap } from './api.ts';
import { useLoad } from './ui.tsx';

/**
 * The name of the service a page belongs to (its secrets, domains, a deployment), for the title and the
 * way back: undefined while it loads or when the page has no service.
 */
export function useServiceName(envId: string | undefined, serviceId: string | undefined): string | undefined {
  const { data } = useLoad(async () => {
    if (!envId || !serviceId) return undefined;
    const { service } = unwrap(
      await api().GET('/v1/environments/{envId}/services/{serviceId}', {
        params: { path: { envId, serviceId } },
      }),
    );
    return service.name;
  }, [envId, serviceId]);
  return data;
}

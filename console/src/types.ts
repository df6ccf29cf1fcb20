import type { paths } from '../../src/client/index.ts';

/** The API's shapes, named once for the pages (all from the generated OpenAPI types). */
type Json<T> = T extends { content: { 'application/json': infer J } } ? J : never;
type Data<T> = Json<T> extends { data: infer D } ? D : never;
type Ok<P extends keyof paths, M extends keyof paths[P]> = paths[P][M] extends { responses: { 200: infer R } }
  ? Data<R>
  : never;
type Body<P extends keyof paths, M extends keyof paths[P]> = paths[P][M] extends { requestBody: infer B }
  ? Json<B>
  : never;

export type Service = Ok<'/v1/environments/{envId}/services/{serviceId}', 'get'>['service'];
export type Deployment = Ok<'/v1/deployments/{deploymentId}', 'get'>['deployment'];
export type Secret = Ok<'/v1/environments/{envId}/secrets', 'get'>['secrets'][number];
export type SecretInput = Body<'/v1/environments/{envId}/secrets', 'put'>['secrets'][number];
export type CustomDomain = NonNullable<
  Ok<'/v1/environments/{envId}/services/{serviceId}/custom-domains', 'get'>['custom_domain']['pending_domain']
>;
export type Dependency = Ok<
  '/v1/environments/{envId}/services/{serviceId}/dependencies',
  'get'
>['dependencies'][number];
export type DependencyBackup = Ok<
  '/v1/environments/{envId}/services/{serviceId}/dependencies/{dependencyId}/backups',
  'get'
>['backups'][number];
export type LogLine = Ok<'/v1/deployments/{deploymentId}/logs', 'get'>['lines'][number];
export type CreateServiceBody = Body<'/v1/environments/{envId}/services', 'post'>;
export type PatchServiceBody = Body<'/v1/environments/{envId}/services/{serviceId}', 'patch'>;
export type DeployBody = Body<'/v1/environments/{envId}/services/{serviceId}/deploy', 'post'>;
export type ServiceMetrics = Ok<'/v1/environments/{envId}/services/{serviceId}/metrics', 'get'>;
export type MetricsPoint = ServiceMetrics['points'][number];
/** One chart of the service page: what it plots and how its values read. */
export interface ChartDef {
  id: string;
  title: string;
  value: (p: MetricsPoint) => number | null;
  /** The axis's unit, shown beside the title. */
  unit: string;
  format: (v: number) => string;
  /** An axis tick: the number alone (the unit is beside the title). */
  tick: (v: number) => string;
  /** A second, dashed series (memory's limit). */
  limit?: (p: MetricsPoint) => number | null;
}

/**
 * The ops.json examples of issue 11 as written (the hosted platform's documented format), each kind on
 * its own and all together: the unit and HTTP tests check every one is accepted as is.
 * @module
 */

export const HOSTED_EXAMPLE = {
  cron: { cron_jobs: [{ schedule: '*/2 * * * *', path: '/api/v1/sync' }] },
  dependencies: {
    s3: {
      buckets: [
        {
          id: 'attachments',
          prefix: 'attachments',
          exports: { BUCKET_NAME: '$name', BUCKET_ARN: '$arn' },
          skip_preview: false,
          preview_only: false,
        },
      ],
    },
    sns: { topics: [{ id: '...', prefix: '...', exports: { TOPIC: '$arn' } }] },
    sqs: { queues: [{ id: '...', prefix: '...', exports: { QUEUE: '$name' } }] },
    rds: {
      instances: [
        {
          id: 'main-db',
          prefix: 'userdata',
          engine: 'postgres',
          version: '17.5',
          storage_gb: 10,
          instance_type: 'db.t4g.small',
          publicly_accessible: false,
          exports: {
            DB_HOST: '$address',
            DB_ENDPOINT: '$endpoint',
            DB_USER: '$username',
            DB_PASSWORD_ARN: '$passwordArn',
            DB_NAME: '$dbName',
            DB_ARN: '$arn',
          },
        },
      ],
    },
    elasticache: {
      clusters: [
        {
          id: 'cache',
          prefix: 'sessions',
          engine: 'redis',
          version: '7.0',
          instance_type: 'cache.t4g.small',
          num_nodes: 1,
          exports: { REDIS_ENDPOINT: '$endpoint', REDIS_PORT: '$port' },
        },
      ],
    },
  },
};

/** The whole example, then each kind of it alone, then its cron jobs alone. */
export const HOSTED_EXAMPLES: { what: string; document: Record<string, unknown> }[] = [
  { what: 'the whole example', document: HOSTED_EXAMPLE },
  ...Object.entries(HOSTED_EXAMPLE.dependencies).map(([kind, types]) => ({
    what: `its ${kind} dependencies`,
    document: { dependencies: { [kind]: types } },
  })),
  { what: 'its cron jobs', document: { cron: HOSTED_EXAMPLE.cron } },
];

/** What GET service reports as `ops_dependencies` for the whole example. */
export const HOSTED_EXAMPLE_DEPENDENCIES = Object.entries(HOSTED_EXAMPLE.dependencies).flatMap(
  ([kind, types]) =>
    Object.values(types).flatMap((list: { id: string; exports: Record<string, string> }[]) =>
      list.map(({ id, exports }) => ({ id, kind, exports })),
    ),
);

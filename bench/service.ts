/** The service every benchmark creates (a name is added per service): small, and deployed by the simulated provider. */
export const BENCH_SERVICE = {
  source: 'docker_image',
  type: 'worker',
  replica_count: 1,
  cpu_count_min: 0.25,
  memory_mb_min: 64,
  docker_image: 'acme/bench',
};

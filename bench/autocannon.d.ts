// autocannon ships no types: the part of its programmatic API the benchmarks use.
declare module 'autocannon' {
  export interface Options {
    url: string;
    connections?: number;
    /** Seconds. */
    duration?: number;
    pipelining?: number;
    /** Worker threads firing the requests; 0 (the default) fires them from the calling thread. */
    workers?: number;
    method?: string;
    headers?: Record<string, string>;
    /** The TLS server name sent (SNI); by default the URL's host. */
    servername?: string;
    /** Given to tls.connect for each connection. */
    tlsOptions?: import('node:tls').ConnectionOptions;
    title?: string;
    /** Requests sent in turn on each connection; `setupRequest` may rewrite one before it goes. */
    requests?: AutocannonRequest[];
  }

  export interface AutocannonRequest {
    method?: string;
    path?: string;
    body?: string;
    headers?: Record<string, string>;
    setupRequest?: (request: AutocannonRequest) => AutocannonRequest;
  }

  /** Percentiles of a histogram, keyed p0_001 … p50 … p99 … p99_999. */
  export interface Histogram {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    total: number;
    p50: number;
    p90: number;
    p97_5: number;
    p99: number;
    [percentile: string]: number;
  }

  export interface Result {
    url: string;
    connections: number;
    duration: number;
    errors: number;
    timeouts: number;
    mismatches: number;
    non2xx: number;
    resets: number;
    '2xx': number;
    statusCodeStats: Record<string, { count: number }>;
    /** Milliseconds; autocannon records whole milliseconds. */
    latency: Histogram & { totalCount: number };
    /** Requests completed per second, sampled each second. */
    requests: Histogram & { sent: number };
    throughput: Histogram;
  }

  export default function autocannon(options: Options): Promise<Result>;
}

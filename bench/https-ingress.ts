import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import autocannon from 'autocannon';
import { selfSignedCertificate } from '../test/helpers/self-signed.ts';
import { median } from './median.ts';
import { type AddRow, cpuSeconds, log, type Proc, spawnNode, waitFor } from './process.ts';
import { negotiatedBySystemOpenssl, wrk, wrkBinary } from './wrk.ts';

/** CPU seconds of a process and its descendants alive now (the HTTPS ingress's HAProxy master and worker). */
function treeCpuSeconds(pid: number | undefined): number {
  const children = (id: number): number[] => {
    try {
      return fs
        .readFileSync(`/proc/${id}/task/${id}/children`, 'utf8')
        .split(' ')
        .filter(Boolean)
        .map(Number);
    } catch {
      return [];
    }
  };
  const all = [pid as number];
  for (let i = 0; i < all.length; i++) all.push(...children(all[i] as number));
  return all.reduce((sum, id) => {
    try {
      return sum + cpuSeconds(id);
    } catch {
      return sum;
    }
  }, 0);
}

const HERE = path.dirname(new URL(import.meta.url).pathname);
const NAME = 'www.bench.test';
const BODY = 'hello from the service\n';
const ROUNDS = Number(process.env.BENCH_ROUNDS || 3);
const DURATION_S = Number(process.env.BENCH_DURATION_S || 5);
const WARMUP_S = Number(process.env.BENCH_WARMUP_S ?? 1);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS || 50);
const HANDSHAKE_CLIENTS = Number(process.env.BENCH_HANDSHAKE_CLIENTS || 16);
/**
 * The key exchange every client here offers, alone: the one group HAProxy (the system's OpenSSL 3.0) and
 * node:https (Node's own OpenSSL) both choose. Offered Node's default list, node:https picks the hybrid
 * post-quantum X25519MLKEM768, which HAProxy's OpenSSL lacks, and each of its handshakes then costs more.
 */
const TLS_CLIENT = { ecdhCurve: 'X25519' } as const;
/**
 * The name wrk connects to and sends as SNI (it sends its URL's host, and HAProxy's strict-sni refuses
 * an address): the certificate names it beside NAME, and requests carry NAME as their Host.
 */
const WRK_NAME = 'localhost';
/** The ingress should keep this much of a bare node:https server's throughput. */
const TARGET = 0.7;

/** Answers every request with BODY: the service behind the ingress (http) or the baseline (https). */
function answering(kind: 'http' | 'https', cert?: { certFile: string; keyFile: string }): Proc {
  const options = cert
    ? `{ cert: fs.readFileSync(${JSON.stringify(cert.certFile)}), key: fs.readFileSync(${JSON.stringify(cert.keyFile)}) }, `
    : '';
  return spawnNode(
    [
      '-e',
      `const fs = require('node:fs');
       const body = Buffer.from(${JSON.stringify(BODY)});
       const server = require('node:${kind}').createServer(${options}(req, res) => {
         res.writeHead(200, { 'content-type': 'text/plain', 'content-length': body.length });
         res.end(body);
       });
       server.keepAliveTimeout = 60_000;
       server.listen(0, '127.0.0.1', () => console.log('listening on ' + server.address().port));`,
    ],
    {},
  );
}

async function portOf(proc: Proc, pattern: RegExp): Promise<number> {
  return Number(
    await waitFor(`${pattern} in the output`, () => {
      if (proc.child.exitCode !== null) throw new Error(`exited: ${proc.out()}`);
      return pattern.exec(proc.out())?.[1];
    }),
  );
}

/** Requests a second, and the CPU each of `servers` used per request (microseconds). */
async function requestsPerSecond(
  port: number,
  servers: Proc[],
): Promise<{ rps: number; cpuUs: number[]; clientCpuUs: number; firstOwnCpuUs: number }> {
  const options = {
    url: `https://127.0.0.1:${port}/`,
    servername: NAME,
    headers: { host: NAME },
    connections: CONNECTIONS,
    tlsOptions: TLS_CLIENT,
  };
  if (WARMUP_S > 0) await autocannon({ ...options, duration: WARMUP_S });
  const cpuFrom = servers.map((p) => treeCpuSeconds(p.child.pid));
  const firstOwnFrom = cpuSeconds(servers[0]?.child.pid);
  const clientFrom = process.cpuUsage();
  const result = await autocannon({ ...options, duration: DURATION_S });
  if (result.errors > 0 || result.timeouts > 0 || result.non2xx > 0) {
    throw new Error(
      `port ${port}: ${result.errors} errors, ${result.timeouts} timeouts, ${result.non2xx} non-2xx`,
    );
  }
  const answered = Math.max(1, result['2xx']);
  const cpuUs = servers.map(
    (p, i) => ((treeCpuSeconds(p.child.pid) - (cpuFrom[i] as number)) * 1e6) / answered,
  );
  const client = process.cpuUsage(clientFrom);
  return {
    rps: result.requests.average,
    cpuUs,
    clientCpuUs: (client.user + client.system) / answered,
    // The first server's own process, its children left out: the Berth process beside HAProxy.
    firstOwnCpuUs: ((cpuSeconds(servers[0]?.child.pid) - firstOwnFrom) * 1e6) / answered,
  };
}

/** Requests a second with wrk, the CPU each of `servers` and wrk itself used per request (microseconds). */
async function wrkRequestsPerSecond(
  binary: string,
  dir: string,
  port: number,
  servers: Proc[],
): Promise<{ rps: number; cpuUs: number[]; clientCpuUs: number }> {
  const options = {
    binary,
    dir,
    url: `https://${WRK_NAME}:${port}/`,
    host: NAME,
    connections: CONNECTIONS,
  };
  if (WARMUP_S > 0) await wrk({ ...options, durationS: WARMUP_S });
  const cpuFrom = servers.map((p) => treeCpuSeconds(p.child.pid));
  const result = await wrk({ ...options, durationS: DURATION_S });
  const answered = Math.max(1, result.requests);
  return {
    rps: result.rps,
    cpuUs: servers.map((p, i) => ((treeCpuSeconds(p.child.pid) - (cpuFrom[i] as number)) * 1e6) / answered),
    clientCpuUs: (result.cpuSeconds * 1e6) / answered,
  };
}

/** CPU microseconds a request cost the servers of the exchange (the ingress and the service behind it). */
const serverCostOf = (m: { cpuUs: number[] }) => m.cpuUs.reduce((sum, us) => sum + us, 0);
/** CPU microseconds a request cost every process in the exchange: the servers' and the client's. */
const costOf = (m: { cpuUs: number[]; clientCpuUs: number }) => serverCostOf(m) + m.clientCpuUs;

/** Full handshakes a second, HANDSHAKE_CLIENTS at once for DURATION_S, each verifying chain and name. */
async function handshakesPerSecond(port: number, ca: string): Promise<number> {
  const handshake = () =>
    new Promise<void>((resolve, reject) => {
      const socket = tls.connect({ ...TLS_CLIENT, host: '127.0.0.1', port, servername: NAME, ca }, () => {
        socket.destroy();
        resolve();
      });
      socket.on('error', reject);
    });
  const until = Date.now() + DURATION_S * 1000;
  let done = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: HANDSHAKE_CLIENTS }, async () => {
      while (Date.now() < until) {
        await handshake();
        done++;
      }
    }),
  );
  return done / ((performance.now() - started) / 1000);
}

/** The protocol, cipher and key exchange `port` negotiates with the benchmark's clients. */
async function negotiated(port: number, ca: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ ...TLS_CLIENT, host: '127.0.0.1', port, servername: NAME, ca }, () => {
      resolve(
        `${socket.getProtocol()} ${socket.getCipher().standardName} ${(socket.getEphemeralKeyInfo() as { name?: string } | null)?.name}`,
      );
      socket.destroy();
    });
    socket.on('error', reject);
  });
}

export async function httpsIngressRows(addRow: AddRow): Promise<void> {
  log('https: the ingress over HTTPS against node:https with the same certificate');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-https-'));
  const {
    certFile,
    keyFile,
    cert: ca,
  } = selfSignedCertificate(dir, {
    label: 'cert',
    commonName: NAME,
    subjectAltName: `DNS:${NAME},DNS:${WRK_NAME}`,
    days: 2,
  });
  const procs: Proc[] = [];
  try {
    const service = answering('http');
    procs.push(service);
    const servicePort = await portOf(service, /listening on (\d+)/);
    const ingressServer = (proxy: 'node' | 'haproxy') =>
      spawnNode([path.join(HERE, 'https-ingress-server.ts')], {
        BENCH_TLS_NAME: NAME,
        BENCH_TLS_CERT_FILE: certFile,
        BENCH_TLS_KEY_FILE: keyFile,
        BENCH_UPSTREAM: `127.0.0.1:${servicePort}`,
        BENCH_INGRESS_PROXY: proxy,
      });
    const ingress = ingressServer('haproxy');
    procs.push(ingress);
    const ingressPort = await portOf(ingress, /https on https:\/\/127\.0\.0\.1:(\d+)/);
    const nodeIngress = ingressServer('node');
    procs.push(nodeIngress);
    const nodePort = await portOf(nodeIngress, /https on https:\/\/127\.0\.0\.1:(\d+)/);
    const baseline = answering('https', { certFile, keyFile });
    procs.push(baseline);
    const baselinePort = await portOf(baseline, /listening on (\d+)/);

    // A comparison is fair only with the same TLS on both sides: a cheaper cipher or key exchange on
    // one side would decide the ratio.
    const tlsOf = await Promise.all([ingressPort, baselinePort, nodePort].map((p) => negotiated(p, ca)));
    if (new Set(tlsOf).size !== 1)
      throw new Error(`https: the servers negotiate different TLS: ${tlsOf.join('; ')}`);
    log(`https: every server negotiates ${tlsOf[0]}`);
    const wrkAt = wrkBinary();
    if (wrkAt) {
      const wrkTls = await Promise.all(
        [ingressPort, baselinePort].map((p) => negotiatedBySystemOpenssl(p, WRK_NAME)),
      );
      if (new Set(wrkTls).size !== 1)
        throw new Error(`https: wrk's OpenSSL negotiates different TLS: ${wrkTls.join('; ')}`);
      log(`https: with wrk's OpenSSL both negotiate ${wrkTls[0]}`);
    } else {
      log('https: wrk is not installed: the row has no wrk reading');
    }

    // The same exchange driven by wrk: the HAProxy ingress, then the baseline.
    const wrkFields = async (binary: string, at: string) => {
      const i = await wrkRequestsPerSecond(binary, at, ingressPort, [ingress, service]);
      const b = await wrkRequestsPerSecond(binary, at, baselinePort, [baseline]);
      return {
        wrk_ingress_rps: i.rps,
        wrk_baseline_rps: b.rps,
        wrk_ratio: i.rps / b.rps,
        wrk_ingress_cpu_us: i.cpuUs[0] as number,
        wrk_service_cpu_us: i.cpuUs[1] as number,
        wrk_baseline_cpu_us: b.cpuUs[0] as number,
        wrk_client_cpu_us: i.clientCpuUs,
        wrk_baseline_client_cpu_us: b.clientCpuUs,
        wrk_cpu_ratio: costOf(b) / costOf(i),
        wrk_server_cpu_ratio: serverCostOf(b) / serverCostOf(i),
      };
    };
    const rps: Record<string, number>[] = [];
    const handshakes: Record<string, number>[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      // The baseline between the two ingresses, so a drifting load weighs on both comparisons alike.
      const i = await requestsPerSecond(ingressPort, [ingress, service]);
      const b = await requestsPerSecond(baselinePort, [baseline]);
      const n = await requestsPerSecond(nodePort, [nodeIngress, service]);
      rps.push({
        ingress_rps: i.rps,
        baseline_rps: b.rps,
        ratio: i.rps / b.rps,
        node_ingress_rps: n.rps,
        node_ratio: n.rps / b.rps,
        // CPU per request in the ingress (HAProxy's processes and the Berth process configuring it, that
        // one also alone; the Node ingress), and in the service behind it. Load moves it less than wall
        // clock, not nothing: a process the scheduler wakes more often handles fewer requests a wake-up.
        ingress_cpu_us: i.cpuUs[0] as number,
        ingress_berth_cpu_us: i.firstOwnCpuUs,
        service_cpu_us: i.cpuUs[1] as number,
        node_ingress_cpu_us: n.cpuUs[0] as number,
        baseline_cpu_us: b.cpuUs[0] as number,
        // Requests a second on a machine whose cores all these processes (autocannon's too) keep busy
        // follow the CPU a request costs them all.
        cpu_ratio: costOf(b) / costOf(i),
        node_cpu_ratio: costOf(b) / costOf(n),
        // The client left out: what a host serving clients elsewhere keeps of node:https's capacity
        // (the ingress and the service share its cores, as Berth runs them).
        server_cpu_ratio: serverCostOf(b) / serverCostOf(i),
        client_cpu_us: i.clientCpuUs,
        ...(wrkAt ? await wrkFields(wrkAt, dir) : {}),
        load_average_1m: os.loadavg()[0] as number,
      });
      const ih = await handshakesPerSecond(ingressPort, ca);
      const bh = await handshakesPerSecond(baselinePort, ca);
      const nh = await handshakesPerSecond(nodePort, ca);
      handshakes.push({
        ingress_per_s: ih,
        baseline_per_s: bh,
        ratio: ih / bh,
        node_ingress_per_s: nh,
        node_ratio: nh / bh,
        load_average_1m: os.loadavg()[0] as number,
      });
    }
    addRow(
      `https: requests/s through the HTTPS ingress (BERTH_INGRESS_PROXY=haproxy; node_* the Node ingress), keep-alive, ${CONNECTIONS} connections (vs node:https, same certificate and bytes); ${wrkAt ? 'wrk_* the same driven by wrk, one thread' : 'wrk not installed: no wrk_* reading'}`,
      `>= ${TARGET}x`,
      rps,
      // Both: on a loaded machine the scheduler favours the three processes of the proxied exchange
      // over the baseline's two, which lifts the wall-clock ratio above what the code earns.
      (m) => (m.ratio as number) >= TARGET && (m.cpu_ratio as number) >= TARGET,
    );
    addRow(
      `https handshakes/s, full TLS handshakes, ${HANDSHAKE_CLIENTS} clients, HAProxy ingress (node_* the Node ingress; vs node:https, same certificate and key exchange)`,
      'reported (no target in issue 27)',
      handshakes,
      () => true,
    );
    log(
      `https: ratio ${median(rps.map((x) => x.ratio as number)).toFixed(2)}x (Node ingress ${median(rps.map((x) => x.node_ratio as number)).toFixed(2)}x${wrkAt ? `; wrk ${median(rps.map((x) => x.wrk_ratio as number)).toFixed(2)}x` : ''})`,
    );
  } finally {
    for (const p of procs.reverse()) await p.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

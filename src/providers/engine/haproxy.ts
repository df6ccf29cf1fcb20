/**
 * HAProxy as the ingress's HTTPS data plane (BERTH_INGRESS_PROXY=haproxy, docs/https.md): a process
 * this module runs and configures, terminating TLS and proxying straight to the replicas, because a
 * request through the Node ingress costs four to five times the CPU of one through HAProxy
 * (docs/performance.md, "HTTPS ingress"). Berth stays the control plane: it renders the routing table,
 * the certificates (by SNI, written 0600 into a private directory) and each service's ops.json settings
 * into HAProxy's configuration. A new deployment's replicas and a renewed certificate reach HAProxy
 * through its runtime API; any other change reloads it (master-worker, listening sockets kept).
 * @module
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import type { Logger } from 'pino';
import type { OpsConfig } from '../../domain/ops-json.ts';
import type { ServedCertificate } from '../provider.ts';
import { ACME_TLS } from './alpn-responder.ts';

/** A routed web service as HAProxy serves it: its host names and where its replicas answer now. */
export interface NativeRoute {
  serviceId: string;
  hosts: string[];
  /** `host:port` of each running replica. */
  targets: string[];
  ops: OpsConfig;
}

/** What the data plane serves: every route, and the certificate of each name that has one. */
export interface NativeTable {
  routes: NativeRoute[];
  certificates: Map<string, ServedCertificate>;
}

export interface NativePlane {
  url: string;
  /** The HAProxy master's process id (its worker is its child). */
  pid(): number | undefined;
  /** Reads the table again now, rather than at the next interval. */
  sync(): Promise<void>;
  close(): Promise<void>;
}

const run = promisify(execFile);
const backendOf = (serviceId: string) => `svc_${serviceId}`;
/** A string for HAProxy's configuration, double-quoted; only ASCII messages and numbers go in here. */
/** An exchange on the runtime socket: HAProxy answers in milliseconds, even while it reloads. */
const RUNTIME_MS = 10_000;
const quoted = (text: string) => `"${text.replace(/["\\]/g, '\\$&').replace(/\n/g, '\\n')}"`;

/** The files HAProxy reads: its configuration, the host -> backend map and the certificate list. */
export function renderHaproxy(options: {
  bind: string;
  port: number;
  dir: string;
  table: NativeTable;
  /** `host:port` of Berth's TLS-ALPN-01 responder, when HAProxy must pass `acme-tls/1` to it. */
  alpnResponder?: string | undefined;
  /** HAProxy's threads (`nbthread`): haproxyThreads() of the host's cores. */
  threads: number;
}): {
  config: string;
  hostsMap: string;
  certList: string;
  certFiles: Map<string, string>;
} {
  const { dir, table } = options;
  const namesByPem = new Map<string, string[]>();
  for (const [name, served] of table.certificates) {
    const pem = `${served.cert.trim()}\n${served.key.trim()}\n`;
    namesByPem.set(pem, [...(namesByPem.get(pem) ?? []), name]);
  }
  // A file per certificate, named for the first name it serves: a renewal keeps the file's name, so its
  // new content is handed to HAProxy at run time, with no reload.
  const certFiles = new Map<string, string>();
  for (const [pem, names] of namesByPem) {
    const first = names.sort()[0] as string;
    certFiles.set(
      path.join(dir, 'certs', `${createHash('sha256').update(first).digest('hex').slice(0, 32)}.pem`),
      pem,
    );
  }
  // No SNI filter: HAProxy matches each name against the certificates' own names, an exact name before
  // a wildcard, as the Node ingress chooses (a custom domain's own, else the ingress domain's wildcard).
  const certList = [...certFiles.keys()]
    .sort()
    .map((file) => `${file}\n`)
    .join('');
  const routes = [...table.routes].sort((a, b) => a.serviceId.localeCompare(b.serviceId));
  const hostsMap = routes
    .flatMap((r) => r.hosts.map((host) => `${host} ${backendOf(r.serviceId)}\n`))
    .join('');
  const lines = [
    'global',
    `  nbthread ${options.threads}`,
    `  stats socket ${path.join(dir, 'admin.sock')} mode 600 level admin`,
    '  log stderr format short local0 warning',
    'defaults',
    '  mode http',
    '  log global',
    '  timeout connect 10s',
    '  timeout client 120s',
    '  timeout server 120s',
    '  timeout http-request 30s',
    '  timeout http-keep-alive 60s',
    ...tlsFront(options),
    // What the Node ingress sends a replica: the client's address (not appended to) and the scheme.
    '  http-request set-header X-Forwarded-For %[src]',
    '  http-request set-header X-Forwarded-Proto https',
    `  use_backend %[req.hdr(host),lower,field(1,:),map(${path.join(dir, 'hosts.map')},no_route)]`,
    '  default_backend no_route',
    'backend no_route',
    `  http-request return status 404 content-type text/plain lf-string ${quoted('no service at %[req.hdr(host)]\n')}`,
  ];
  for (const route of routes) {
    const { ingress, ip_whitelist: whitelist } = route.ops;
    lines.push(`backend ${backendOf(route.serviceId)}`);
    lines.push(`  timeout connect ${ingress.connection_timeout}s`);
    lines.push(`  timeout server ${Math.max(ingress.read_timeout, ingress.send_timeout)}s`);
    if (whitelist.length > 0) {
      lines.push(
        `  http-request return status 403 content-type text/plain string ${quoted('your address may not reach this service\n')} unless { src ${whitelist.join(' ')} }`,
      );
    }
    const limit = ingress.request_body_size * 1024 * 1024;
    lines.push(
      `  http-request return status 413 content-type text/plain string ${quoted(`request bodies are limited to ${ingress.request_body_size} MB\n`)} if { req.hdr_val(content-length) gt ${limit} }`,
    );
    lines.push(
      `  http-request return status 503 content-type text/plain string ${quoted('the service has no running replicas\n')} if { nbsrv lt 1 }`,
    );
    // A route stored before hsts_max_age existed lacks it: no header, as at the Node ingress.
    if (typeof ingress.hsts_max_age === 'number') {
      lines.push(`  http-response set-header Strict-Transport-Security "max-age=${ingress.hsts_max_age}"`);
    }
    lines.push('  balance roundrobin');
    // Spare slots, in maintenance: a new deployment's replicas take them at run time, with no reload.
    for (let i = 0; i < slotsFor(route.targets.length); i++) {
      const target = route.targets[i];
      lines.push(target ? `  server r${i} ${target}` : `  server r${i} 127.0.0.1:1 disabled`);
    }
  }
  return { config: `${lines.join('\n')}\n`, hostsMap, certList, certFiles };
}

/**
 * A frontend that logs is sent a line for each request it takes (without a log format, "Connect from
 * <client> to <address>", formatted with sprintf), at level info, which the `warning` level then drops:
 * about 5% of HAProxy's CPU a keep-alive request spent on nothing (docs/performance.md). The backends
 * keep `log global` for what HAProxy says of their servers.
 */
const NO_TRAFFIC_LOG = '  no log';

/**
 * HAProxy's threads on a host of `cores`: one per two cores, at least one. The ingress shares the host
 * with the replicas it proxies to and with Berth; on 2 cores a second thread (HAProxy's default there)
 * cost about 30% more CPU a request in HAProxy and 20% more in the replica, which it preempted and woke
 * three to four times as often (docs/performance.md, "Why HAProxy read 0.52x").
 */
export const haproxyThreads = (cores: number) => Math.max(1, Math.floor(cores / 2));

/**
 * Where TLS ends: the `https` frontend binds the HTTPS port itself, or, with a TLS-ALPN-01 responder,
 * a TCP frontend binds it, reads each ClientHello's ALPN and passes `acme-tls/1` connections (the CA's
 * validations) to the responder undecrypted, every other to the `https` frontend over a private unix
 * socket with the PROXY protocol, which keeps the client's address for X-Forwarded-For and allow-lists.
 * Only then: the extra hop costs CPU on every connection.
 */
function tlsFront(options: { bind: string; port: number; dir: string; alpnResponder?: string | undefined }) {
  const host = options.bind.includes(':') ? `[${options.bind}]` : options.bind;
  // strict-sni: a name without a certificate fails its handshake, as it does at the Node ingress.
  // h2 beside HTTP/1.1: browsers multiplex over one connection (the Node ingress speaks HTTP/1.1 only).
  const tls = `ssl crt-list ${path.join(options.dir, 'certs.list')} strict-sni alpn h2,http/1.1`;
  if (!options.alpnResponder)
    return ['frontend https', NO_TRAFFIC_LOG, `  bind ${host}:${options.port} ${tls}`];
  const inner = path.join(options.dir, 'https.sock');
  return [
    'frontend tls_in',
    '  mode tcp',
    NO_TRAFFIC_LOG,
    `  bind ${host}:${options.port}`,
    // A ClientHello fits in the first segment; a client silent for 5 s gets the https frontend's error.
    '  tcp-request inspect-delay 5s',
    '  tcp-request content accept if { req.ssl_hello_type 1 }',
    `  use_backend acme_tls if { req.ssl_alpn ${ACME_TLS} }`,
    '  default_backend tls_terminate',
    'backend acme_tls',
    '  mode tcp',
    `  server berth ${options.alpnResponder}`,
    'backend tls_terminate',
    '  mode tcp',
    `  server https unix@${inner} send-proxy-v2`,
    'frontend https',
    NO_TRAFFIC_LOG,
    `  bind unix@${inner} mode 600 accept-proxy ${tls}`,
  ];
}

/** Server slots for a backend of `count` replicas: a power of two, at least 4. */
const slotsFor = (count: number) => Math.max(4, 2 ** Math.ceil(Math.log2(Math.max(1, count))));

/** What, when it changes, takes a reload: everything but the replicas' addresses within their slots. */
function shapeOf(table: NativeTable): NativeTable {
  return {
    ...table,
    routes: table.routes.map((r) => ({ ...r, targets: r.targets.map(() => '127.0.0.1:1') })),
  };
}

/**
 * The runtime API commands that point a backend's server slots at `targets` (ready) and put the rest in
 * maintenance: how a deployment's new replicas are served without a reload, keeping every connection.
 */
export function serverCommands(serviceId: string, targets: string[]): string[] {
  const backend = backendOf(serviceId);
  return Array.from({ length: slotsFor(targets.length) }, (_, i) => {
    const target = targets[i];
    if (!target) return [`set server ${backend}/r${i} state maint`];
    const colon = target.lastIndexOf(':');
    const address = target.slice(0, colon).replace(/^\[|\]$/g, '');
    return [
      `set server ${backend}/r${i} addr ${address} port ${target.slice(colon + 1)}`,
      `set server ${backend}/r${i} state ready`,
    ];
  }).flat();
}

/**
 * Whether `show servers state` says the service's backend serves `targets`: each in its slot, ready (no
 * administrative maintenance), and every other slot in maintenance.
 */
export function serving(state: string, serviceId: string, targets: string[]): boolean {
  const backend = backendOf(serviceId);
  const slots = new Map<string, { address: string; maintenance: boolean }>();
  for (const line of state.split('\n')) {
    // be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state ... srv_port (the 19th field)
    const fields = line.split(' ');
    if (fields[1] !== backend || fields[3] === undefined) continue;
    const address = (fields[4] ?? '').includes(':') ? `[${fields[4]}]` : fields[4];
    slots.set(fields[3], { address: `${address}:${fields[18]}`, maintenance: (Number(fields[6]) & 1) === 1 });
  }
  return [...Array(slotsFor(targets.length)).keys()].every((i) => {
    const slot = slots.get(`r${i}`);
    const target = targets[i];
    return slot !== undefined && (target ? slot.address === target && !slot.maintenance : slot.maintenance);
  });
}

/**
 * Each service backend's answers so far by status class (1xx to 5xx) and HAProxy's average total time
 * of its last 1024 requests, from `show stat` (CSV, its header first). HAProxy keeps no distribution of
 * times, so each answer is counted at that average.
 */
export function backendAnswers(stat: string): { serviceId: string; classes: number[]; ms: number }[] {
  const [header = '', ...rows] = stat.split('\n');
  const columns = header.replace(/^# /, '').split(',');
  const at = (name: string) => columns.indexOf(name);
  const classes = ['hrsp_1xx', 'hrsp_2xx', 'hrsp_3xx', 'hrsp_4xx', 'hrsp_5xx'].map(at);
  return rows.flatMap((row) => {
    const fields = row.split(',');
    const name = fields[at('pxname')] ?? '';
    if (!name.startsWith('svc_') || fields[at('svname')] !== 'BACKEND') return [];
    return [
      {
        serviceId: name.slice('svc_'.length),
        classes: classes.map((i) => Number(fields[i]) || 0),
        ms: Number(fields[at('ttime')]) || 0,
      },
    ];
  });
}

/** Sends commands to HAProxy's runtime API on `socketPath`; its answer (empty lines when all went well). */
export async function runtime(
  socketPath: string,
  commands: string[],
  timeoutMs = RUNTIME_MS,
): Promise<string> {
  return new Promise((resolve, reject) => {
    let answer = '';
    const socket = net.connect(socketPath, () => socket.end(`${commands.join(';')}\n`));
    // The sync loop waits for each exchange: one HAProxy never answers would stop every later update.
    socket.setTimeout(timeoutMs, () =>
      socket.destroy(new Error(`haproxy's runtime socket did not answer within ${timeoutMs} ms`)),
    );
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      answer += chunk;
    });
    socket.on('end', () => resolve(answer));
    socket.on('error', reject);
  });
}

/** A port free now on `host`, for a listener asked for on port 0 (HAProxy would not say which it took). */
async function freePort(host: string): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, resolve);
  });
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function accepting(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });
}

/**
 * Starts HAProxy serving `load()`'s table over HTTPS on `bind:port`, reading the table again every
 * `intervalMs` (and on `sync()`) and reloading HAProxy when what it renders changed. Throws with
 * HAProxy's own words when it cannot start (not installed, port taken).
 */
export async function startHaproxy(options: {
  bind: string;
  port: number;
  load: () => Promise<NativeTable>;
  logger: Logger;
  intervalMs: number;
  /** Where each answer HAProxy gave a service is counted (its metrics): its status and time. */
  counted: (serviceId: string, status: number, ms: number) => void;
  binary?: string;
  /** `host:port` of Berth's TLS-ALPN-01 responder (alpn-responder.ts), with BERTH_ACME_CHALLENGE=tls-alpn-01. */
  alpnResponder?: string | undefined;
}): Promise<NativePlane> {
  const binary = options.binary ?? 'haproxy';
  const port = options.port === 0 ? await freePort(options.bind) : options.port;
  // mkdtemp makes the directory 0700: the private keys in it are readable by this user alone.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-haproxy-'));
  fs.mkdirSync(path.join(dir, 'certs'), { mode: 0o700 });
  const configFile = path.join(dir, 'haproxy.cfg');
  const threads = haproxyThreads(os.availableParallelism());
  const socketPath = path.join(dir, 'admin.sock');
  let rendered = '';
  let shape = '';
  let servers = new Map<string, string>();
  let certs = new Map<string, string>();

  /**
   * Writes what `table` renders to. What changed: nothing; what the runtime API can change (replicas'
   * addresses within their slots, a certificate's content: `renewed`); or more, which takes a reload.
   */
  const write = (table: NativeTable): { change: 'none' | 'runtime' | 'reload'; renewed: string[] } => {
    const files = renderHaproxy({
      bind: options.bind,
      port,
      dir,
      table,
      alpnResponder: options.alpnResponder,
      threads,
    });
    const all = `${files.config}${files.hostsMap}${files.certList}${[...files.certFiles.values()].join('')}`;
    if (all === rendered) return { change: 'none', renewed: [] };
    const shaped = renderHaproxy({
      bind: options.bind,
      port,
      dir,
      table: shapeOf(table),
      alpnResponder: options.alpnResponder,
      threads,
    });
    const nextShape = `${shaped.config}${shaped.hostsMap}${shaped.certList}`;
    const renewed: string[] = [];
    for (const [file, pem] of files.certFiles) {
      if (certs.get(file) === pem) continue;
      if (certs.has(file)) renewed.push(file);
      fs.writeFileSync(file, pem, { mode: 0o600 });
    }
    certs = files.certFiles;
    fs.writeFileSync(path.join(dir, 'hosts.map'), files.hostsMap);
    fs.writeFileSync(path.join(dir, 'certs.list'), files.certList);
    fs.writeFileSync(configFile, files.config);
    // Certificates no longer listed (renewed, removed) leave the disk; HAProxy has read the rest.
    for (const file of fs.readdirSync(path.join(dir, 'certs'))) {
      const full = path.join(dir, 'certs', file);
      if (!files.certFiles.has(full)) fs.rmSync(full, { force: true });
    }
    rendered = all;
    const change = nextShape === shape ? 'runtime' : 'reload';
    shape = nextShape;
    return { change, renewed };
  };

  let child: ChildProcess | undefined;
  let output = '';
  let closing = false;
  const launch = () => {
    output = '';
    // A HAProxy would outlive this process killed with SIGKILL, holding the port. So a shell that
    // becomes HAProxy (exec keeps its pid) leaves a reader on a pipe from this process behind it, which
    // stops HAProxy and removes its directory (the keys) when the pipe closes, as it does when this
    // process ends, however it ends. The
    // reader is no child of HAProxy's (forked twice): HAProxy's master waits for its children to stop.
    const started = spawn(
      '/bin/sh',
      [
        '-c',
        'exec 3<&0; ( (read _ <&3; kill -TERM $$; rm -rf "$2") & ); exec 3<&-; exec "$0" -W -db -f "$1"',
        binary,
        configFile,
        dir,
      ],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    const keep = (chunk: Buffer) => {
      // The last few lines are what explains an exit; warnings on each reload are not worth more.
      output = `${output}${chunk}`.slice(-4000);
    };
    started.stdout?.on('data', keep);
    started.stderr?.on('data', keep);
    started.on('error', (err) => {
      output += String(err);
    });
    started.on('exit', (code, signal) => {
      started.stdin?.end();
      if (closing || child !== started) return;
      options.logger.error({ code, signal, output }, 'haproxy exited: starting it again');
      setTimeout(() => {
        if (!closing) child = launch();
      }, 1000).unref();
    });
    return started;
  };

  const initial = await options.load();
  write(initial);
  servers = new Map(initial.routes.map((r) => [r.serviceId, r.targets.join(' ')]));
  child = launch();
  const deadline = Date.now() + 15_000;
  while (!(await accepting(options.bind, port))) {
    const current = child;
    if (current.exitCode !== null || current.signalCode !== null || Date.now() > deadline) {
      closing = true;
      current.kill('SIGTERM');
      fs.rmSync(dir, { recursive: true, force: true });
      throw new Error(`BERTH_INGRESS_PROXY=haproxy: haproxy did not start: ${output.trim() || 'no output'}`);
    }
    await sleep(50);
  }

  let syncing: Promise<void> | null = null;
  let again = false;
  const syncOnce = async () => {
    const table = await options.load();
    const { change, renewed } = write(table);
    const previous = servers;
    servers = new Map(table.routes.map((r) => [r.serviceId, r.targets.join(' ')]));
    if (change === 'none') return;
    if (change === 'runtime') {
      const commands = table.routes.flatMap((r) =>
        previous.get(r.serviceId) === r.targets.join(' ') ? [] : serverCommands(r.serviceId, r.targets),
      );
      const answer = commands.length > 0 ? await runtime(socketPath, commands) : '';
      const state = await runtime(socketPath, ['show servers state']);
      let applied = table.routes.every((r) => serving(state, r.serviceId, r.targets));
      for (const file of renewed) {
        // New connections get the renewed certificate; open ones finish on the old.
        await runtime(socketPath, [`set ssl cert ${file} <<\n${certs.get(file)}`]);
        const committed = await runtime(socketPath, [`commit ssl cert ${file}`]);
        applied &&= /Success!/.test(committed);
      }
      if (applied) return;
      // Refused (never expected): the reload below serves the new table from the files instead.
      options.logger.warn({ answer }, 'haproxy refused a change at run time: reloading');
    }
    try {
      await run(binary, ['-c', '-q', '-f', configFile]);
    } catch (err) {
      // Never reached with what Berth renders; if it is, HAProxy keeps serving the last good table.
      rendered = '';
      shape = '';
      options.logger.error({ err }, 'haproxy refused the rendered configuration: still serving the last one');
      return;
    }
    // The master starts a worker on the new files and hands it the listening sockets; the old worker
    // finishes the requests it holds. The next change waits for the new worker: a signal that reached
    // the master while it re-executes itself would be lost, or end it.
    const before = await workerPid();
    child?.kill('SIGUSR2');
    const deadline = Date.now() + 15_000;
    while ((await workerPid()) === before && Date.now() < deadline) await sleep(20);
  };
  const workerPid = () =>
    runtime(socketPath, ['show info']).then(
      (info) => /^Pid: (\d+)$/m.exec(info)?.[1],
      () => undefined,
    );
  const sync = (): Promise<void> => {
    if (syncing) {
      again = true;
      return syncing;
    }
    syncing = (async () => {
      do {
        again = false;
        try {
          await syncOnce();
        } catch (err) {
          options.logger.warn({ err }, 'the ingress could not read its routing table for haproxy');
        }
      } while (again && !closing);
    })().finally(() => {
      syncing = null;
    });
    return syncing;
  };
  // Counters of the worker serving now: a reload starts a worker from zero.
  let seen = new Map<string, { worker: string; classes: number[] }>();
  const count = async () => {
    const [info, stat] = await Promise.all([
      runtime(socketPath, ['show info']),
      runtime(socketPath, ['show stat -1 2 -1']),
    ]);
    const worker = /^Pid: (\d+)$/m.exec(info)?.[1] ?? '';
    const next = new Map<string, { worker: string; classes: number[] }>();
    for (const { serviceId, classes, ms } of backendAnswers(stat)) {
      const before = seen.get(serviceId);
      const from = before?.worker === worker ? before.classes : [0, 0, 0, 0, 0];
      classes.forEach((n, i) => {
        for (let k = from[i] ?? 0; k < n; k++) options.counted(serviceId, (i + 1) * 100, ms);
      });
      next.set(serviceId, { worker, classes });
    }
    seen = next;
  };
  const timer = setInterval(() => {
    void sync().then(() => (closing ? undefined : count().catch(() => undefined)));
  }, options.intervalMs);
  timer.unref();

  const host = options.bind.includes(':') ? `[${options.bind}]` : options.bind;
  return {
    url: `https://${host}:${port}`,
    pid: () => child?.pid,
    sync,
    close: async () => {
      closing = true;
      clearInterval(timer);
      await syncing;
      const current = child;
      if (current && current.exitCode === null && current.signalCode === null) {
        const exited = new Promise((resolve) => current.once('exit', resolve));
        current.kill('SIGTERM');
        await exited;
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

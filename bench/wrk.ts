/**
 * wrk (C, one epoll thread) as a load generator beside autocannon: it costs about half autocannon's CPU
 * a request, so on a machine it shares with the servers it leaves them more of the cores, nearer what
 * they get with their clients elsewhere. It runs with the system's OpenSSL and its defaults.
 * @module
 */
import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** wrk's path on PATH, or undefined when it is not installed. */
export function wrkBinary(): string | undefined {
  try {
    return execFileSync('sh', ['-c', 'command -v wrk'], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
}

/** wrk's summary as its `done` callback writes it, on its last line of output. */
const SUMMARY_SCRIPT = `done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('{"requests":%d,"duration_us":%d,"errors":%d,"status_errors":%d}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status))
end
`;

export interface WrkReading {
  rps: number;
  requests: number;
  /** wrk's own CPU (user + system) over the run, seconds. */
  cpuSeconds: number;
}

/**
 * Runs wrk against `url` for `durationS` with `connections` keep-alive connections on one thread,
 * sending `host` as the Host header. Its CPU is read from the shell that waited for it (a reaped
 * child's time counts in its parent's cutime and cstime). Throws when a request failed.
 */
export async function wrk(options: {
  binary: string;
  dir: string;
  url: string;
  host: string;
  connections: number;
  durationS: number;
}): Promise<WrkReading> {
  const script = path.join(options.dir, 'wrk-summary.lua');
  if (!fs.existsSync(script)) fs.writeFileSync(script, SUMMARY_SCRIPT);
  const { stdout } = await run(
    'sh',
    [
      '-c',
      '"$@"; status=$?; cat /proc/$$/stat; exit $status',
      'sh',
      options.binary,
      '-t1',
      `-c${options.connections}`,
      `-d${options.durationS}s`,
      '-H',
      `Host: ${options.host}`,
      '-s',
      script,
      options.url,
    ],
    { encoding: 'utf8' },
  );
  const lines = stdout.trim().split('\n');
  const stat = lines.at(-1) ?? '';
  const summary = JSON.parse(lines.at(-2) ?? '{}') as {
    requests: number;
    duration_us: number;
    errors: number;
    status_errors: number;
  };
  if (summary.errors > 0 || summary.status_errors > 0) {
    throw new Error(
      `wrk ${options.url}: ${summary.errors} socket errors, ${summary.status_errors} non-2xx/3xx`,
    );
  }
  // cutime and cstime are fields 16 and 17 of stat(5), in clock ticks (100 a second on Linux).
  const fields = stat.split(') ')[1]?.split(' ') ?? [];
  return {
    rps: summary.requests / (summary.duration_us / 1e6),
    requests: summary.requests,
    cpuSeconds: (Number(fields[13]) + Number(fields[14])) / 100,
  };
}

/**
 * The protocol, cipher and key exchange `port` negotiates with the system's OpenSSL client and its
 * defaults (`openssl s_client`), which are wrk's: wrk sets no cipher or group of its own.
 */
export async function negotiatedBySystemOpenssl(port: number, servername: string): Promise<string> {
  const { stdout } = await run(
    'sh',
    [
      '-c',
      'openssl s_client -connect "127.0.0.1:$0" -servername "$1" </dev/null 2>/dev/null',
      String(port),
      servername,
    ],
    { encoding: 'utf8' },
  );
  const cipher = /^New, (\S+), Cipher is (\S+)/m.exec(stdout);
  const group = /^Server Temp Key: ([^,\n]+)/m.exec(stdout);
  return `${cipher?.[1]} ${cipher?.[2]} ${group?.[1]}`;
}

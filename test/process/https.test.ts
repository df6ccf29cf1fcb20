import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { TLSSocket } from 'node:tls';
import { pollUntil } from '../helpers/poll.ts';
import { type BerthProcess, listening, serveEnv } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * BERTH_TLS_CERT_FILE / BERTH_TLS_KEY_FILE: the API over HTTPS, checked by clients that trust only a CA
 * made here (openssl), verifying the chain and the host name; a replaced certificate serves new
 * connections without a restart; bad settings stop the start with one line naming the setting.
 */
const servers = serverFixture('sim');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-https-'));
const file = (name: string) => path.join(dir, name);
/** Runs openssl in the test's directory; arguments are split at spaces (none has one). */
const openssl = (command: string) => execFileSync('openssl', command.split(' '), { cwd: dir, stdio: 'pipe' });
const EC_KEY = '-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes';

before(async () => {
  openssl(
    `req -x509 ${EC_KEY} -days 1 -subj /CN=berth-test-ca -keyout ca.key -out ca.pem ` +
      '-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign',
  );
  fs.writeFileSync(
    file('server.ext'),
    'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n',
  );
});
after(async () => {
  fs.rmSync(dir, { recursive: true, force: true });
});

/** A server certificate for `localhost` signed by the test CA, with a key of its own: `{name}.pem`, `{name}.key`. */
function serverCertificate(name: string): { cert: string; key: string } {
  openssl(`req ${EC_KEY} -subj /CN=localhost -keyout ${name}.key -out ${name}.csr`);
  openssl(
    `x509 -req -in ${name}.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 -extfile server.ext -out ${name}.pem`,
  );
  return { cert: file(`${name}.pem`), key: file(`${name}.key`) };
}

interface Answer {
  status: number;
  body: string;
  /** SHA-256 fingerprint of the certificate the server presented. */
  fingerprint: string;
}

/** One request on a new connection, trusting only `ca`, checking the certificate is for `servername`. */
function get(
  url: string,
  options: { ca?: string; servername?: string; token?: string } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = https.get(
      url,
      {
        agent: false,
        ca: options.ca ?? fs.readFileSync(file('ca.pem'), 'utf8'),
        servername: options.servername ?? 'localhost',
        headers: options.token ? { authorization: `Bearer ${options.token}` } : {},
      },
      (res) => {
        const fingerprint = (res.socket as TLSSocket).getPeerCertificate().fingerprint256;
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, fingerprint }));
      },
    );
    request.on('error', reject);
    request.setTimeout(10_000, () => request.destroy(new Error('timed out')));
  });
}

const fingerprintOf = (pem: string) => new X509Certificate(fs.readFileSync(pem)).fingerprint256;

function serve(env: Record<string, string>): BerthProcess {
  return servers.run(['serve'], serveEnv(env));
}

test('the API over HTTPS: chain and host name verified; a replaced certificate serves new connections', async () => {
  const first = serverCertificate('first');
  // The files Berth is told about, replaced below the way certbot and friends do: a rename over them.
  fs.copyFileSync(first.cert, file('live.pem'));
  fs.copyFileSync(first.key, file('live.key'));
  const server = serve({ BERTH_TLS_CERT_FILE: file('live.pem'), BERTH_TLS_KEY_FILE: file('live.key') });
  try {
    // An address (127.0.0.1): the client checks the certificate for `localhost`, the name it was issued for.
    const { url: base } = await listening(server, 'https');
    const token = (await server.waitForOutput(/API token:\s+([0-9a-f-]{36})/))[1] as string;

    const health = await get(`${base}/health`);
    assert.equal(health.status, 200, health.body);
    assert.equal(health.fingerprint, fingerprintOf(first.cert));
    const envs = await get(`${base}/v1/environments`, { token });
    assert.equal(envs.status, 200, envs.body);
    assert.equal(JSON.parse(envs.body).data.environments.length, 1);
    assert.equal((await get(`${base}/v1/environments`)).status, 401);

    // The verification is real: another name, or a client that does not trust the test CA, is refused.
    await assert.rejects(get(`${base}/health`, { servername: 'berth.example.com' }), /altnames|Hostname/i);
    await assert.rejects(
      get(`${base}/health`, { ca: fs.readFileSync(first.cert, 'utf8') }),
      /certificate|issuer/i,
    );

    const second = serverCertificate('second');
    fs.copyFileSync(second.key, file('next.key'));
    fs.copyFileSync(second.cert, file('next.pem'));
    // Half-way (the new key beside the old certificate): not a pair, so the old one keeps serving.
    fs.renameSync(file('next.key'), file('live.key'));
    await server.waitForOutput(
      /TLS files changed but were not loaded, the previous certificate still serves/,
    );
    const between = await get(`${base}/health`);
    assert.equal(between.status, 200);
    assert.equal(between.fingerprint, fingerprintOf(first.cert));
    fs.renameSync(file('next.pem'), file('live.pem'));
    const renewed = await pollUntil(
      'a new connection to get the new certificate',
      async () => {
        const answer = await get(`${base}/health`);
        return answer.fingerprint === fingerprintOf(second.cert) ? answer : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 200 },
    );
    assert.equal(renewed.status, 200);
    assert.equal((await get(`${base}/v1/environments`, { token })).status, 200);
  } finally {
    assert.equal(await server.kill('SIGTERM'), 0, server.stderr());
  }
});

test('bad TLS and ACME settings stop the start with one line naming the setting', async () => {
  const pair = serverCertificate('pair');
  const other = serverCertificate('other');
  fs.writeFileSync(file('garbage.pem'), 'not a certificate\n');
  const cases: [Record<string, string>, RegExp][] = [
    [{ BERTH_TLS_CERT_FILE: pair.cert }, /^berth: BERTH_TLS_KEY_FILE must be set too/],
    [{ BERTH_TLS_KEY_FILE: pair.key }, /^berth: BERTH_TLS_CERT_FILE must be set too/],
    [
      { BERTH_TLS_CERT_FILE: file('missing.pem'), BERTH_TLS_KEY_FILE: pair.key },
      /^berth: BERTH_TLS_CERT_FILE cannot be read \(.*missing\.pem: ENOENT\)/,
    ],
    [
      { BERTH_TLS_CERT_FILE: pair.cert, BERTH_TLS_KEY_FILE: file('missing.key') },
      /^berth: BERTH_TLS_KEY_FILE cannot be read/,
    ],
    [
      { BERTH_TLS_CERT_FILE: file('garbage.pem'), BERTH_TLS_KEY_FILE: pair.key },
      /^berth: BERTH_TLS_CERT_FILE holds no PEM certificate/,
    ],
    [
      { BERTH_TLS_CERT_FILE: pair.cert, BERTH_TLS_KEY_FILE: pair.cert },
      /^berth: BERTH_TLS_KEY_FILE holds no unencrypted PEM private key/,
    ],
    [
      { BERTH_TLS_CERT_FILE: pair.cert, BERTH_TLS_KEY_FILE: other.key },
      /^berth: BERTH_TLS_KEY_FILE is not the private key of the certificate in BERTH_TLS_CERT_FILE/,
    ],
    [
      { BERTH_ACME_DIRECTORY_URL: 'http://acme.example/directory' },
      /^berth: BERTH_ACME_DIRECTORY_URL must be the https:\/\/ URL of an ACME directory/,
    ],
    [{ BERTH_ACME_DIRECTORY_URL: 'not a url' }, /^berth: BERTH_ACME_DIRECTORY_URL must be/],
    [{ BERTH_ACME_EMAIL: 'ops at example' }, /^berth: BERTH_ACME_EMAIL must be an email address/],
    [{ BERTH_ACME_CA_FILE: pair.cert }, /^berth: BERTH_ACME_CA_FILE is set but ACME is off/],
    [
      { BERTH_ACME_EMAIL: 'ops@example.com', BERTH_ACME_CA_FILE: file('missing.pem') },
      /^berth: BERTH_ACME_CA_FILE cannot be read \(.*missing\.pem: ENOENT\)/,
    ],
    [
      { BERTH_ACME_EMAIL: 'ops@example.com', BERTH_ACME_CA_FILE: file('garbage.pem') },
      /^berth: BERTH_ACME_CA_FILE holds no PEM certificate/,
    ],
  ];
  for (const [env, message] of cases) {
    const proc = serve(env);
    const code = await proc.exited;
    assert.equal(code, 2, `${JSON.stringify(env)}: ${proc.stderr()}`);
    assert.match(proc.stderr(), message);
    assert.equal(proc.stderr().trim().split('\n').length, 1, proc.stderr());
  }
});

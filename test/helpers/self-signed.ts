/**
 * A self-signed P-256 certificate made with openssl, for tests and benchmarks that serve TLS: its files
 * in `dir` and their PEM text.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export interface SelfSigned {
  certFile: string;
  keyFile: string;
  cert: string;
  key: string;
}

export function selfSignedCertificate(
  dir: string,
  options: { label: string; commonName: string; subjectAltName: string; days?: number },
): SelfSigned {
  const keyFile = path.join(dir, `${options.label}.key`);
  const certFile = path.join(dir, `${options.label}.pem`);
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-days',
      String(options.days ?? 1),
      '-subj',
      `/CN=${options.commonName}`,
      '-addext',
      `subjectAltName=${options.subjectAltName}`,
      '-keyout',
      keyFile,
      '-out',
      certFile,
    ],
    { stdio: 'ignore' },
  );
  return {
    certFile,
    keyFile,
    cert: fs.readFileSync(certFile, 'utf8'),
    key: fs.readFileSync(keyFile, 'utf8'),
  };
}

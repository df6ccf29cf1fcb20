import { createPrivateKey, X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import tls from 'node:tls';
import type { Logger } from 'pino';
import { type Config, ConfigError } from '../config.ts';

/** The PEM text of BERTH_TLS_CERT_FILE (the certificate, then any intermediates) and BERTH_TLS_KEY_FILE. */
export interface TlsPair {
  cert: Buffer;
  key: Buffer;
}

type TlsFiles = NonNullable<Config['tls']>;

function readSetting(setting: string, file: string): Buffer {
  try {
    return fs.readFileSync(file);
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw new ConfigError(`${setting} cannot be read (${file}: ${reason})`);
  }
}

/**
 * Reads the two files and checks that they make a pair: a PEM certificate, a PEM private key, and the key
 * the certificate's. Throws a ConfigError naming the setting to fix.
 */
export function readTlsPair(files: TlsFiles): TlsPair {
  const cert = readSetting('BERTH_TLS_CERT_FILE', files.certFile);
  const key = readSetting('BERTH_TLS_KEY_FILE', files.keyFile);
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(cert);
  } catch {
    throw new ConfigError(`BERTH_TLS_CERT_FILE holds no PEM certificate (${files.certFile})`);
  }
  let privateKey: ReturnType<typeof createPrivateKey>;
  try {
    privateKey = createPrivateKey(key);
  } catch {
    throw new ConfigError(`BERTH_TLS_KEY_FILE holds no unencrypted PEM private key (${files.keyFile})`);
  }
  if (!certificate.checkPrivateKey(privateKey)) {
    throw new ConfigError(
      `BERTH_TLS_KEY_FILE is not the private key of the certificate in BERTH_TLS_CERT_FILE (${files.keyFile}, ${files.certFile})`,
    );
  }
  try {
    tls.createSecureContext({ cert, key });
  } catch (error) {
    throw new ConfigError(
      `BERTH_TLS_CERT_FILE and BERTH_TLS_KEY_FILE cannot serve TLS: ${(error as Error).message}`,
    );
  }
  return { cert, key };
}

/** How often the two files are looked at: a renewed certificate serves within about this long. */
const WATCH_INTERVAL_MS = 1000;

/**
 * Serves a renewed certificate without a restart: when either file changes (stat polling, which also
 * sees a file replaced by a rename or a symlink swapped, as certbot and Kubernetes do), the pair is read
 * again and, if it is still a pair, new connections get it. A half-written pair (the certificate renewed,
 * the key not yet) is logged and the old one keeps serving until the next change completes it.
 */
export function watchTlsFiles(server: tls.Server, files: TlsFiles, logger: Logger): { stop(): void } {
  const reload = () => {
    try {
      server.setSecureContext(readTlsPair(files));
    } catch (error) {
      logger.warn(
        `TLS files changed but were not loaded, the previous certificate still serves: ${(error as Error).message}`,
      );
      return;
    }
    logger.info({ certFile: files.certFile }, 'TLS certificate reloaded');
  };
  const options = { interval: WATCH_INTERVAL_MS, persistent: false };
  fs.watchFile(files.certFile, options, reload);
  fs.watchFile(files.keyFile, options, reload);
  return {
    stop: () => {
      fs.unwatchFile(files.certFile, reload);
      fs.unwatchFile(files.keyFile, reload);
    },
  };
}

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError } from '../../config.ts';
import { dockerSettings as loadConfig } from './settings.ts';

test('the ingress answers at http://{BERTH_INGRESS_HOST}:{BERTH_INGRESS_PORT} unless BERTH_PUBLIC_URL says otherwise', () => {
  const plain = loadConfig({});
  assert.equal(plain.publicUrl, 'http://localhost:8088');
  assert.equal(plain.ingressBind, '127.0.0.1');
  assert.equal(
    loadConfig({ BERTH_INGRESS_HOST: 'apps.test', BERTH_INGRESS_PORT: '9000' }).publicUrl,
    'http://apps.test:9000',
  );

  const proxied = loadConfig({ BERTH_PUBLIC_URL: 'https://apps.example.com/' });
  assert.equal(proxied.publicUrl, 'https://apps.example.com');
  assert.equal(proxied.ingressHost, 'apps.example.com', 'the public host is where services live');
  assert.equal(
    loadConfig({ BERTH_PUBLIC_URL: 'http://apps.example.com:8443' }).publicUrl,
    'http://apps.example.com:8443',
  );
});

test('a BERTH_PUBLIC_URL that cannot be an origin, or names another host than BERTH_INGRESS_HOST, is refused', () => {
  for (const bad of [
    'apps.example.com',
    'ftp://apps.example.com',
    'https://apps.example.com/base',
    'https://a@apps.example.com',
    'https://apps.example.com/#top',
    'https://apps.example.com/base?x=1',
    'https://apps.example.com?',
    'https://apps.example.com#',
    'https:apps.example.com',
    'https://apps.example.com extra',
    ' https://apps.example.com',
    'https://apps.example.com\n',
  ]) {
    assert.throws(
      () => loadConfig({ BERTH_PUBLIC_URL: bad }),
      (error: Error) => {
        assert.ok(error instanceof ConfigError, JSON.stringify(bad));
        assert.equal(
          error.message,
          `BERTH_PUBLIC_URL must be http:// or https:// with a host and an optional port, nothing else (like https://apps.example.com), got "${bad}"`,
        );
        return true;
      },
    );
  }
  // A password in it is never quoted back, with or without a user.
  for (const [bad, quoted] of [
    ['https://ops:s3cret@apps.example.com', 'https://ops:***@apps.example.com'],
    ['https://:s3cret@apps.example.com', 'https://:***@apps.example.com'],
  ] as const) {
    assert.throws(
      () => loadConfig({ BERTH_PUBLIC_URL: bad }),
      (error: Error) => {
        assert.ok(error.message.endsWith(`got "${quoted}"`), error.message);
        assert.doesNotMatch(error.message, /s3cret/);
        return true;
      },
    );
  }
  assert.throws(
    () => loadConfig({ BERTH_PUBLIC_URL: 'https://apps.example.com', BERTH_INGRESS_HOST: 'localhost' }),
    /must be BERTH_INGRESS_HOST/,
  );
});

test("network sandboxes made ahead are on unless BERTH_DOCKER_SANDBOXES=off; BERTH_DOCKER_SANDBOX_IMAGE replaces Berth's own image", () => {
  assert.equal(loadConfig({}).sandboxes, true);
  assert.equal(loadConfig({ BERTH_DOCKER_SANDBOXES: 'on' }).sandboxes, true);
  assert.equal(loadConfig({ BERTH_DOCKER_SANDBOXES: 'off' }).sandboxes, false);
  assert.throws(() => loadConfig({ BERTH_DOCKER_SANDBOXES: 'no' }), /must be "on" or "off"/);
  assert.equal(loadConfig({}).sandboxImage, undefined);
  assert.equal(loadConfig({ BERTH_DOCKER_SANDBOX_IMAGE: '' }).sandboxImage, undefined);
  assert.equal(
    loadConfig({ BERTH_DOCKER_SANDBOX_IMAGE: 'registry.k8s.io/pause:3.9' }).sandboxImage,
    'registry.k8s.io/pause:3.9',
  );
});

test('BERTH_INGRESS_PROXY chooses what serves HTTPS: the Node ingress by default, or HAProxy', () => {
  assert.equal(loadConfig({}).ingressProxy, 'node');
  assert.equal(loadConfig({ BERTH_INGRESS_PROXY: 'haproxy' }).ingressProxy, 'haproxy');
  assert.throws(
    () => loadConfig({ BERTH_INGRESS_PROXY: 'nginx' }),
    /BERTH_INGRESS_PROXY must be node or haproxy/,
  );
  // With HAProxy too (it passes the CA's handshakes to Berth): only told whether they come.
  const alpn = loadConfig({ BERTH_INGRESS_PROXY: 'haproxy', BERTH_ACME_CHALLENGE: 'tls-alpn-01' });
  assert.equal(alpn.ingressAlpnChallenges, true);
  assert.equal(loadConfig({ BERTH_INGRESS_PROXY: 'haproxy' }).ingressAlpnChallenges, false);
});

import ipaddr from 'ipaddr.js';
import type { FieldError } from './errors.ts';

/** Subscriptions an account may hold. */
export const MAX_WEBHOOKS = 20;
export const MAX_WEBHOOK_URL = 2000;
/** Attempts of one delivery (the first and seven retries). */
export const WEBHOOK_ATTEMPTS = 8;
/** A receiver has this long to answer. */
export const WEBHOOK_TIMEOUT_MS = 10_000;

/**
 * The wait before the next attempt after `attempts` failed: the base (BERTH_WEBHOOK_RETRY_BASE_MS, 5 s
 * by default) times four for each earlier failure, at most an hour: 5 s, 20 s, 80 s, 5 min, 21 min, 1 h,
 * 1 h; about two and a half hours from first to last attempt.
 */
export function webhookRetryDelayMs(baseMs: number, attempts: number): number {
  return Math.min(3_600_000, baseMs * 4 ** Math.max(0, attempts - 1));
}

/**
 * Whether a receiver may be at this address: only public unicast ones, unless the operator allows
 * private ones (BERTH_WEBHOOK_ALLOW_PRIVATE). Loopback, private, link-local (cloud metadata at
 * 169.254.169.254), carrier-grade NAT, multicast, reserved and unspecified addresses are refused, in
 * IPv4, IPv6 and every IPv6 form of an IPv4 address alike (IPv4-mapped, IPv4-compatible, translated,
 * NAT64, 6to4, Teredo): a subscription must not reach inside the operator's network.
 */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  // process() turns an IPv4-mapped address (::ffff:a.b.c.d) into its IPv4 address.
  const parsed = ipaddr.process(address);
  if (parsed.kind() === 'ipv6') {
    const [a, b, c, d, e, f, high = 0, low = 0] = (parsed as ipaddr.IPv6).parts;
    // IPv4-compatible (::a.b.c.d, deprecated): ipaddr.js calls ::7f00:1 unicast, but a stack may reach
    // 127.0.0.1 through it. Judged as the IPv4 address it embeds (:: and ::1 are 0.0.0.x, refused too).
    if (a === 0 && b === 0 && c === 0 && d === 0 && e === 0 && f === 0) {
      return new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]).range() === 'unicast';
    }
  }
  return parsed.range() === 'unicast';
}

/** The URL's own shape (the address its host resolves to is checked apart, at create and delivery). */
export function checkWebhookUrl(raw: string): { url: URL } | { error: FieldError } {
  const field = 'url';
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { error: { field, error: 'url must be an absolute http:// or https:// URL' } };
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    return { error: { field, error: 'url must start with http:// or https://' } };
  }
  if (url.username || url.password) {
    return { error: { field, error: 'url must not carry credentials: deliveries are signed instead' } };
  }
  return { url };
}

/** The host of a URL as an address when it is one (`[::1]` -> `::1`), else undefined (a DNS name). */
export function literalAddress(url: URL): string | undefined {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return ipaddr.isValid(host) ? host : undefined;
}

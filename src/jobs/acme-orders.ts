/**
 * Finding an order a run left behind between the CA creating it and Berth storing its URL (a SIGKILL
 * inside the newOrder request). Before asking for an order, jobs/certificates.ts stores the key its CSR
 * will use and clears the order's URL: a row with a key and no URL is exactly an order that may exist at
 * the CA unrecorded. Asking for a new one then would make a second order for the name, so the next run
 * looks first in the account's list of orders (RFC 8555 7.1.2.1), which Pebble and step-ca keep. A CA
 * without the list (Let's Encrypt's Boulder leaves it out) itself answers a newOrder identical to a
 * pending or ready one of the account with that same order, so either way the name has one order.
 * @module
 */
import type { Client, Order } from 'acme-client';

/** acme-client's signed-request layer: it has no call for the account's orders, so they are fetched by URL. */
interface SignedRequests {
  apiRequest(
    url: string,
    payload: null,
    validStatusCodes: number[],
  ): Promise<{ data: unknown; headers: Record<string, string | undefined> }>;
}

/** Pages of the orders list read at most: an account's list grows with every certificate it ordered. */
const MAX_PAGES = 20;

/** The next page's URL, from a `Link: <url>;rel="next"` header. */
function nextPage(link: string | undefined): string | undefined {
  for (const part of (link ?? '').split(',')) {
    const match = part.match(/<([^>]+)>\s*;\s*rel="?next"?/);
    if (match) return match[1];
  }
  return undefined;
}

/**
 * The account's order for exactly `name` that can still be finished with the stored key: `pending` or
 * `ready` (an order is finalized only after its URL is stored, so a lost one was never finalized), not
 * expired. Null when the CA keeps no list, or none matches.
 */
export async function lostOrder(
  client: Client,
  name: string,
  ordersUrl: string | undefined,
): Promise<Order | null> {
  if (!ordersUrl) return null;
  // The signed-request layer is acme-client's own (`client.api`), not in its typings.
  const api = (client as unknown as { api: SignedRequests }).api;
  let url: string | undefined = ordersUrl;
  let best: Order | null = null;
  for (let page = 0; url && page < MAX_PAGES; page++) {
    const res = await api.apiRequest(url, null, [200]);
    const urls = (res.data as { orders?: unknown }).orders;
    for (const orderUrl of Array.isArray(urls) ? urls : []) {
      if (typeof orderUrl !== 'string') continue;
      const order = await client.getOrder({ url: orderUrl } as Order).catch(() => null);
      if (!order || (order.status !== 'pending' && order.status !== 'ready')) continue;
      if (order.identifiers.length !== 1 || order.identifiers[0]?.value !== name) continue;
      if (order.expires && Date.parse(order.expires) <= Date.now()) continue;
      // The latest-expiring one is the newest: the one the killed run asked for.
      if (!best || Date.parse(order.expires ?? '') > Date.parse(best.expires ?? '')) best = order;
    }
    url = nextPage(res.headers.link);
  }
  return best;
}

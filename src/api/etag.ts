/**
 * Entity tags of Berth's representations (RFC 9110 section 8.8.3): the one place that says what a
 * representation's ETag is and how a client's If-None-Match / If-Match lists are compared with it.
 * The tag is strong: a hash of the exact bytes the GET sends, so equal tags mean equal bodies.
 * @module
 */
import { hash } from 'node:crypto';

/** The ETag of a serialized representation: a quoted, strong tag. */
export function etagOf(body: string | Buffer): string {
  return `"${hash('sha1', body, 'base64url')}"`;
}

/** The entity tags of an If-None-Match / If-Match value; `*` matches any current representation. */
function listed(header: string): { any: boolean; tags: string[] } {
  const tags: string[] = [];
  let any = false;
  // entity-tag = [ W/ ] DQUOTE *etagc DQUOTE; etagc excludes the quote, so a tag holds no comma.
  for (const part of header.split(',')) {
    const item = part.trim();
    if (item === '*') any = true;
    else if (item.length > 0) tags.push(item);
  }
  return { any, tags };
}

const opaque = (tag: string) => (tag.startsWith('W/') ? tag.slice(2) : tag);

/**
 * If-None-Match holds no tag matching `etag` (weak comparison): the client's copy is not current, so
 * the full representation is sent. False means the client already holds it (304 on a GET).
 */
export function noneMatch(header: string | undefined, etag: string): boolean {
  if (header === undefined) return true;
  const { any, tags } = listed(header);
  if (any) return false;
  const current = opaque(etag);
  return !tags.some((tag) => opaque(tag) === current);
}

/**
 * If-Match is absent or names `etag` (strong comparison: a weak tag never matches): a conditional
 * write may go ahead. False means the client changes a representation it has not seen (412).
 */
export function matches(header: string | undefined, etag: string): boolean {
  if (header === undefined) return true;
  const { any, tags } = listed(header);
  return any || tags.some((tag) => !tag.startsWith('W/') && tag === etag);
}

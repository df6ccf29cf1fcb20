import { distance } from 'fastest-levenshtein';

/**
 * The known field a misspelled one most likely meant, or null. Ignoring case and `_`/`-`, a field is
 * close when it is at most two edits away (`deploynow` -> `deploy_now`), when the unknown name begins it
 * (one edit: `val` -> `value`), or when the unknown name is a word of it, each other word counting one
 * edit (`tag` -> `docker_image_tag`, `replicas` -> `replica_count`). Ties go to the first in schema order.
 */
const MAX_EDITS = 2;
const plain = (name: string) => name.toLowerCase().replace(/[_-]/g, '');

function edits(unknown: string, known: string): number {
  const u = plain(unknown);
  const whole = distance(u, plain(known));
  const prefix = u.length >= 3 && plain(known).startsWith(u) ? 1 : Number.POSITIVE_INFINITY;
  const words = known.split('_');
  const others = words.length - 1;
  const partial = Math.min(
    ...words.filter((word) => word.length >= 3).map((word) => distance(u, word) + others),
  );
  return Math.min(whole, prefix, partial);
}

export function closestField(unknown: string, known: readonly string[]): string | null {
  let best: string | null = null;
  let bestEdits = MAX_EDITS + 1;
  for (const name of known) {
    const n = edits(unknown, name);
    // A name as short as the edits needed to reach it is a guess, not a typo.
    if (n < bestEdits && n < unknown.length) {
      best = name;
      bestEdits = n;
    }
  }
  return best;
}

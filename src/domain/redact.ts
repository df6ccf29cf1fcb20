/**
 * Masks secret values in text meant for people (log lines, events, webhook bodies): every occurrence
 * of a value becomes `[redacted]`, longest values first so that one value inside another is masked
 * whole. Values shorter than MIN_MASKED characters are left alone: masking `1` or `on` would garble
 * every line while hiding nothing a guess would not find.
 */
export const MIN_MASKED = 4;
export const REDACTED = '[redacted]';

export function redactor(values: Iterable<string>): (text: string) => string {
  const masked = [...new Set(values)]
    .filter((v) => v.length >= MIN_MASKED)
    .sort((a, b) => b.length - a.length);
  if (masked.length === 0) return (text) => text;
  const pattern = new RegExp(masked.map((v) => v.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'), 'g');
  return (text) => text.replace(pattern, REDACTED);
}

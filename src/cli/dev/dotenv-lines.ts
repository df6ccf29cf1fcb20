/**
 * The lines of a .env file that dotenv would skip without a word: not blank, not a comment, not a
 * `KEY=VALUE` (or `export KEY=VALUE`, `KEY: VALUE`) line, and not inside a quoted value that spans
 * lines. `berth secrets import` refuses a file with any, so a typo (`DATABASE URL=...`) never drops a
 * secret while the import reports success. Each is named by its number and what stands before its `=`
 * (never what follows: that may be a secret).
 */
export function unreadableLines(text: string): { line: number; before?: string }[] {
  const unreadable: { line: number; before?: string }[] = [];
  let quote: string | null = null;
  text.split(/\r?\n/).forEach((raw, i) => {
    if (quote !== null) {
      if (closes(raw, quote)) quote = null;
      return;
    }
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const assignment = /^(?:export\s+)?[\w.-]+(?:\s*=|:\s)\s*(.*)$/.exec(line);
    if (!assignment) {
      const equals = line.indexOf('=');
      unreadable.push(equals < 0 ? { line: i + 1 } : { line: i + 1, before: line.slice(0, equals).trim() });
      return;
    }
    const value = assignment[1] ?? '';
    const opening = value[0];
    if ((opening === '"' || opening === "'" || opening === '`') && !closes(value.slice(1), opening))
      quote = opening;
  });
  return unreadable;
}

/** Whether `text` holds the closing `quote` (one not escaped with a backslash). */
function closes(text: string, quote: string): boolean {
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '\\') i++;
    else if (text[i] === quote) return true;
  }
  return false;
}

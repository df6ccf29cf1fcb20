/**
 * What the two prepared-statement clients (`prepared.ts` on Postgres, `pglite-prepared.ts` embedded)
 * read from a statement's text, in one place: its first word, found after blanks and comments, since a
 * migration's statement may open with a comment.
 * @module
 */

/** Blanks and comments before a statement's first word. */
export const LEAD = String.raw`^(?:\s|--[^\n]*(?:\n|$)|/\*[\s\S]*?\*/)*`;

/**
 * A statement that may change a table's shape (a DO block may hold one): a prepared statement's row
 * description may be stale after it, so the clients drop what they prepared.
 */
const SCHEMA_CHANGE = new RegExp(`${LEAD}(?:create|alter|drop|do|comment|truncate)\\b`, 'i');

export const isSchemaChange = (text: string): boolean => SCHEMA_CHANGE.test(text);

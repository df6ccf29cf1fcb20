import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/**
 * The yaml package, loaded on first use: most command lines read and print no YAML, and loading it is
 * about a fifth of a client command's start.
 */
export const yaml = (): typeof import('yaml') => require('yaml');

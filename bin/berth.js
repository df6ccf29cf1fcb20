#!/usr/bin/env node
// Berth runs its TypeScript sources directly: Node 24 strips types natively (no build step to forget).
import { main } from '../src/cli/main.ts';

await main(process.argv);

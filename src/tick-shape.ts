/**
 * One of Node's tick objects held for the life of a server process, so that V8 keeps its shape.
 *
 * Why: `process.nextTick` (which node:http's streams call a few times a request) builds each tick
 * object as a literal with computed symbol keys, so its shape is a chain of V8 maps reached through
 * weak transitions. A full collection that finds no tick object alive (at the start, in a quiet spell:
 * V8's memory reducer, the idle collector) collects the chain, and the next tick builds a new one. After
 * a few, nextTick's define-property feedback goes megamorphic for good and its optimized code defines
 * every field through V8's runtime: 0.35 us a tick instead of 0.05, 2.5-2.8 us a poll
 * (docs/performance.md, "nextTick's slow state"). An object alive with the chain's last map keeps every
 * map of the chain (a map holds its parent), so new tick objects take the same maps.
 * @module
 */
import { createHook } from 'node:async_hooks';

let kept: object | undefined;

/** Keeps a tick object (the hook that finds it is enabled only for the one `nextTick` call). */
export function keepTickShape(): void {
  if (kept !== undefined) return;
  const hook = createHook({
    init(_asyncId, type, _triggerAsyncId, resource) {
      if (type === 'TickObject') kept = resource;
    },
  }).enable();
  process.nextTick(ignore);
  hook.disable();
}

function ignore(): void {}

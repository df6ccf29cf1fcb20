import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';

/**
 * nextTick's feedback for its tick object's fields, as V8 prints it, after rounds of ticks each followed
 * by full collections with no tick object alive (what a server's quiet spells do).
 */
function tickFieldFeedback(kept: boolean): string[] {
  const script = `
    ${kept ? `(await import(${JSON.stringify(new URL('./tick-shape.ts', import.meta.url).href)})).keepTickShape();` : ''}
    const ignore = () => {};
    for (let round = 0; round < 12; round++) {
      for (let i = 0; i < 5000; i++) process.nextTick(ignore);
      await new Promise((resolve) => setImmediate(resolve));
      gc();
      gc();
    }
    %DebugPrint(process.nextTick);`;
  const out = execFileSync(
    process.execPath,
    ['--allow-natives-syntax', '--expose-gc', '--input-type=module', '-e', script],
    { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 },
  );
  return out.split('\n').filter((line) => line.includes('DefineKeyedOwnPropertyInLiteral'));
}

test("a kept tick object keeps nextTick's field definitions monomorphic through full collections", () => {
  const slots = tickFieldFeedback(true);
  // Five fields (three symbols, callback, args): V8 printed them, so the check below means something.
  assert.equal(slots.length, 5, slots.join('\n'));
  assert.ok(
    slots.every((line) => line.includes('MONOMORPHIC')),
    slots.join('\n'),
  );
});

test('without it they go megamorphic (when this fails, Node no longer needs tick-shape.ts)', () => {
  // Whether a round's collection finds the chain dead depends on V8's timing: with other processes
  // busy, about one run in eight kept it through all twelve rounds. Five runs make a false alarm rare.
  const runs: string[][] = [];
  for (let run = 0; run < 5; run++) {
    const slots = tickFieldFeedback(false);
    runs.push(slots);
    if (slots.some((line) => line.includes('MEGAMORPHIC'))) return;
  }
  assert.fail(`no run went megamorphic:\n${runs.map((slots) => slots.join('\n')).join('\n--\n')}`);
});

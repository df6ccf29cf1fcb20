/**
 * Summarizes a V8 CPU profile (`node --cpu-prof`): self time by package or source file, and the
 * functions with the most self time. `node bench/profile-summary.ts <file.cpuprofile> [top] [until-ms]`:
 * only the first `until-ms` of the profile when given (a start up to the moment it was healthy, say).
 * The "why not met" figures of docs/performance.md are read with it.
 */
import fs from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

const [file, topArg, untilArg] = process.argv.slice(2);
if (!file) throw new Error('usage: node bench/profile-summary.ts <file.cpuprofile> [top]');
const top = Number(topArg ?? 25);
const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const untilUs = untilArg === undefined ? Number.POSITIVE_INFINITY : Number(untilArg) * 1000;
const selfUs = new Map<number, number>();
let elapsedUs = 0;
profile.samples.forEach((id, i) => {
  elapsedUs += profile.timeDeltas[i] ?? 0;
  if (elapsedUs <= untilUs) selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
});
const total = [...selfUs.values()].reduce((a, b) => a + b, 0);

/** node_modules/<package>, src/<file>, node:<builtin>, or the V8 category ("(garbage collector)"). */
function placeOf(url: string, name: string): string {
  if (!url) return name.startsWith('(') ? name : '(native)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1];
  if (pkg) return pkg;
  const src = /\/((?:src|bench|test)\/.*)$/.exec(url)?.[1];
  return src ?? url.replace(/^file:\/\//, '');
}

const byPlace = new Map<string, number>();
const byFunction = new Map<string, number>();
for (const [id, us] of selfUs) {
  const node = byId.get(id);
  if (!node) continue;
  const { functionName, url, lineNumber } = node.callFrame;
  const place = placeOf(url, functionName);
  byPlace.set(place, (byPlace.get(place) ?? 0) + us);
  const fn = `${functionName || '(anonymous)'} ${place}:${lineNumber + 1}`;
  byFunction.set(fn, (byFunction.get(fn) ?? 0) + us);
}
const show = (title: string, map: Map<string, number>) => {
  console.log(`\n${title}`);
  for (const [k, us] of [...map].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(
      `${((us / total) * 100).toFixed(1).padStart(5)}%  ${(us / 1000).toFixed(0).padStart(6)} ms  ${k}`,
    );
  }
};
console.log(`total sampled: ${(total / 1000).toFixed(0)} ms`);
show('self time by place', byPlace);
show('self time by function', byFunction);

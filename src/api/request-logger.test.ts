import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { requestLoggers } from './request-logger.ts';

function capture(level: string) {
  const lines: Array<Record<string, unknown>> = [];
  const parent = pino({ level }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { parent, lines };
}

test('a request logger writes the lines its level lets through, with the request id bound', () => {
  const { parent, lines } = capture('warn');
  const log = requestLoggers(parent, { reqId: 'r-1' }, {});
  log.info('not written');
  log.debug({ a: 1 }, 'not written');
  log.warn({ a: 1 }, 'written');
  log.error('also written %s', 'here');
  assert.equal(log.level, 'warn');
  assert.deepEqual(
    lines.map(({ reqId, msg, a, level }) => ({ reqId, msg, a, level })),
    [
      { reqId: 'r-1', msg: 'written', a: 1, level: 40 },
      { reqId: 'r-1', msg: 'also written here', a: undefined, level: 50 },
    ],
  );
});

test("a route's own level, a level set later, and a child keep the request id", () => {
  const { parent, lines } = capture('warn');
  const routeLevel = requestLoggers(parent, { reqId: 'r-2' }, { level: 'debug' });
  routeLevel.debug('debug of a route at debug');
  const raised = requestLoggers(parent, { reqId: 'r-3' }, {});
  raised.level = 'info';
  raised.info('info once raised');
  raised.child({ step: 'x' }).warn('from a child');
  assert.deepEqual(
    lines.map(({ reqId, msg, step }) => ({ reqId, msg, step })),
    [
      { reqId: 'r-2', msg: 'debug of a route at debug', step: undefined },
      { reqId: 'r-3', msg: 'info once raised', step: undefined },
      { reqId: 'r-3', msg: 'from a child', step: 'x' },
    ],
  );
});

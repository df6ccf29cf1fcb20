/**
 * Hooks that wait only sometimes. Fastify's callback hooks cost no promise; an async hook costs one on
 * every request. Most /v1 requests find what they need in memory (a cached token, a place in the rate
 * limit window, a cached read), so their hooks are written as steps that return a promise only when they
 * must wait, and run as callback hooks.
 * @module
 */
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';

export type Step = (request: FastifyRequest, reply: FastifyReply) => void | Promise<void>;

function run(step: Step, request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void): void {
  let result: void | Promise<void>;
  try {
    result = step(request, reply);
  } catch (error) {
    done(error as Error);
    return;
  }
  if (result instanceof Promise) result.then(() => done(), done);
  else done();
}

/** A callback hook running `step`: done at once, or when its promise settles. */
export function hookOf(step: Step) {
  return (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void =>
    run(step, request, reply, done);
}

/** `value`, then `next` on it: synchronously when `value` is not a promise. */
export function andThen<T, U>(value: T | Promise<T>, next: (value: T) => U | Promise<U>): U | Promise<U> {
  return value instanceof Promise ? value.then(next) : next(value);
}

/** The same for a preParsing hook, which hands the request's payload on unchanged. */
export function parsingHookOf(step: Step) {
  return <P>(
    request: FastifyRequest,
    reply: FastifyReply,
    payload: P,
    done: (error: Error | null, payload?: P) => void,
  ): void => run(step, request, reply, (error) => done(error ?? null, payload));
}

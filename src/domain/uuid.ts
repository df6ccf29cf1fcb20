const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Every id Berth hands out is a UUID: anything else names nothing (a 404, a refused cursor). */
export function isUuid(value: string): boolean {
  return UUID.test(value);
}

/**
 * The memory of the hosted cloud's instance classes that ops.json's `instance_type` names (rds
 * `db.<family>.<size>`, elasticache `cache.<family>.<size>`), for providers that run a dependency on one
 * machine and cap it at what the class would have: a service then meets the limits it will meet there.
 * Burstable (t), general purpose (m) and memory optimised (r) families of every generation; another
 * class is not known here (null), and a provider applies no cap for it.
 * @module
 */

const GIB = 1024 ** 3;

/** rds: GiB by family and size (db.m: 8 GiB per `large`, db.r twice that; db.t up to 2xlarge). */
const RDS: Record<string, Record<string, number>> = {
  t: { micro: 1, small: 2, medium: 4, large: 8, xlarge: 16, '2xlarge': 32 },
  m: scaled(8),
  r: scaled(16),
};

/** elasticache: GiB by family and size, as the cloud lists its node types (not powers of two). */
const CACHE: Record<string, Record<string, number>> = {
  t: { micro: 0.5, small: 1.37, medium: 3.09 },
  m: {
    large: 6.38,
    xlarge: 12.93,
    '2xlarge': 26.04,
    '4xlarge': 52.26,
    '12xlarge': 157.12,
    '16xlarge': 209.55,
  },
  r: {
    large: 13.07,
    xlarge: 26.32,
    '2xlarge': 52.82,
    '4xlarge': 105.81,
    '12xlarge': 317.77,
    '16xlarge': 419.09,
  },
};

/** `large` holds `large` GiB, `xlarge` twice that, `<n>xlarge` n times `xlarge`. */
function scaled(large: number): Record<string, number> {
  const sizes: Record<string, number> = { large, xlarge: large * 2 };
  for (const n of [2, 4, 8, 12, 16, 24]) sizes[`${n}xlarge`] = large * 2 * n;
  return sizes;
}

/**
 * The bytes of memory the instance class has, or null when it is not one of the classes above (a
 * family such as `x2g`, a size such as `metal`, a kind other than rds and elasticache).
 */
export function instanceMemoryBytes(kind: string, instanceType: unknown): number | null {
  if (typeof instanceType !== 'string') return null;
  const match = /^(db|cache)\.([tmr])\d+[a-z]*\.([a-z0-9]+)$/.exec(instanceType);
  if (!match) return null;
  const [, prefix, family = '', size = ''] = match;
  const table =
    kind === 'rds' && prefix === 'db' ? RDS : kind === 'elasticache' && prefix === 'cache' ? CACHE : null;
  const gib = table?.[family]?.[size];
  return gib === undefined ? null : Math.round(gib * GIB);
}

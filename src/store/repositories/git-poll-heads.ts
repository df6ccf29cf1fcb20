import { sql } from 'kysely';
import type { Db } from '../database.ts';
import type { ServiceRow } from '../schema.ts';

/** The services the git poller watches: live, non-preview git services with auto_deploy, not jobs. */
export async function pollTargets(db: Db): Promise<ServiceRow[]> {
  return db
    .selectFrom('services')
    .selectAll()
    .where('source', 'in', ['github', 'gitlab'])
    .where('auto_deploy', '=', true)
    .where('type', '!=', 'job')
    .where('is_preview', '=', false)
    .where('is_deleted', '=', false)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
}

/**
 * Records the head seen for a service. `first`: the service had none (the head it is watched from, not
 * deployed); `moved`: it changed, and this call moved it (of racing pollers only one gets `moved`: the
 * update re-checks its condition on the row the other wrote); `same`: nothing new.
 */
export async function advanceHead(
  db: Db,
  serviceId: string,
  head: string,
): Promise<'first' | 'moved' | 'same'> {
  const inserted = await db
    .insertInto('git_poll_heads')
    .values({ service_id: serviceId, head })
    .onConflict((oc) => oc.column('service_id').doNothing())
    .returning('service_id')
    .executeTakeFirst();
  if (inserted) return 'first';
  const moved = await db
    .updateTable('git_poll_heads')
    .set({ head, seen_at: new Date() })
    .where('service_id', '=', serviceId)
    .where('head', '!=', head)
    .returning('service_id')
    .executeTakeFirst();
  return moved ? 'moved' : 'same';
}

/** The head recorded for a service, and the commit time of the newest push deployed on it. */
export async function headOf(
  db: Db,
  serviceId: string,
): Promise<{ head: string; pushed_at: Date | null } | undefined> {
  return db
    .selectFrom('git_poll_heads')
    .select(['head', 'pushed_at'])
    .where('service_id', '=', serviceId)
    .executeTakeFirst();
}

/** A push deployed on a service: its commit is the head, and `pushed_at` keeps the newest commit time. */
export async function recordPushedHead(
  db: Db,
  serviceId: string,
  head: string,
  at: Date | null,
): Promise<void> {
  await db
    .insertInto('git_poll_heads')
    .values({ service_id: serviceId, head, pushed_at: at })
    .onConflict((oc) =>
      oc.column('service_id').doUpdateSet({
        head,
        seen_at: new Date(),
        // greatest() passes over a null: a push without a time keeps the last one known.
        pushed_at: sql<Date | null>`greatest(git_poll_heads.pushed_at, excluded.pushed_at)`,
      }),
    )
    .execute();
}

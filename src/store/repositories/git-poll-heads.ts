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

/**
 * Which fields a service must have, by source and type (the spec's Create Service table). Plain data
 * and functions with no schema library, so the console's create form follows the very rules the API
 * checks (`service-rules.ts`).
 * @module
 */
import type { ServiceType, Source, SpecField } from './service-fields.ts';

/** The fields that say where a source's code comes from; a change of source must bring them along. */
export function sourceFieldsOf(source: Source): SpecField[] {
  switch (source) {
    case 'github':
    case 'gitlab':
      return ['git_repo_full_name', 'git_repo_branch'];
    case 'docker_image':
      return ['docker_image'];
    case 'helm_chart':
      return ['helm_chart_repo', 'helm_chart_name'];
  }
}

/**
 * Fields a service of this source and type requires (beyond name and source); without a source (not
 * chosen yet, or unreadable) only the type's. Charts size themselves; other sources need resources.
 */
export function requiredFields(source: Source | null, type: ServiceType | null): SpecField[] {
  if (source === null) return requiredByType(type);
  const resources: SpecField[] =
    source === 'helm_chart' ? [] : ['replica_count', 'cpu_count_min', 'memory_mb_min'];
  return [...resources, ...sourceFieldsOf(source), ...requiredByType(type)];
}

function requiredByType(type: ServiceType | null): SpecField[] {
  return type === 'web' || type === 'internal' ? ['port'] : type === 'cron' ? ['cron_schedule'] : [];
}

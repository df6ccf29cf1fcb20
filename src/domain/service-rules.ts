/**
 * The rules of Create Service (spec table and numbered rules) and of the contract's PATCH, as plain
 * functions over already shape-checked input (types, enums, lengths and ranges are checked by the route
 * schema). Both return field errors in the order of the spec's table.
 * @module
 */
import { isCronExpression } from './cron-expression.ts';
import type { FieldError } from './errors.ts';
import { GIT_REPO_NAME_RULE, isGitRepoName } from './git-repo-name.ts';
import { parseOpsJson } from './ops-json.ts';
import {
  EMPTY_SPEC,
  FIELD_SOURCES,
  type OptionalSpec,
  type ServiceSpec,
  SOURCES,
  type Source,
  SPEC_FIELDS,
  type SpecField,
  type SpecInput,
} from './service-fields.ts';
import { requiredFields, sourceFieldsOf } from './service-requirements.ts';

const isSet = (value: unknown) => value !== null && value !== undefined && value !== false && value !== '';

/** Trims the fields the spec says are trimmed server side; blank `build_context` is unset. */
function normalize(input: SpecInput): SpecInput {
  const out: SpecInput = { ...input };
  if (typeof out.name === 'string') out.name = out.name.trim();
  if (out.ops_json === '') out.ops_json = null;
  for (const field of ['dockerfile_path', 'ops_json_path', 'build_context'] as const) {
    const value = out[field];
    if (typeof value === 'string')
      out[field] = value.trim() || (field === 'build_context' ? null : value.trim());
  }
  return out;
}

const NAME_CREATE = /^[A-Za-z ]+$/;
const NAME_PATCH = /^[A-Za-z -]+$/;
const IMAGE_REPOSITORY = /^[a-z0-9]+(?:[._-]+[a-z0-9]+)*(?:\/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*$/;
const REGISTRY = /^[A-Za-z0-9.-]+(:\d{1,5})?(\/[a-z0-9._-]+)*$/;

function checkName(name: string, mode: 'create' | 'patch'): string | null {
  if (name.length < 3) return 'name must be at least 3 characters';
  if (name.length > 50) return 'name must be at most 50 characters';
  // "Letters" alone reads as any letter, and a name such as `Café` was refused without saying why.
  if (mode === 'create' && !NAME_CREATE.test(name))
    return 'name may contain only letters and spaces (A to Z, upper or lower case: no accented letters, digits, hyphens or underscores)';
  if (mode === 'patch' && !NAME_PATCH.test(name))
    return 'name may contain only letters, spaces and hyphens (A to Z, upper or lower case: no accented letters, digits or underscores)';
  return null;
}

function sourceList(sources: readonly Source[]): string {
  const names = sources.map((s) => (s === 'docker_image' ? 'docker_image' : s));
  return names.length === 1
    ? `the ${names[0]} source`
    : `${names.slice(0, -1).join(', ')} and ${names.at(-1)} sources`;
}

/** Checks a complete spec. `mustBeInRequest` lists required fields that must come in this request. */
function checkSpec(
  spec: ServiceSpec,
  mode: 'create' | 'patch',
  request: SpecInput,
  mustBeInRequest: ReadonlySet<SpecField>,
): FieldError[] {
  const errors: FieldError[] = [];
  const add = (field: string, error: string) => errors.push({ field, error });
  // Without a readable source (its shape error is reported instead) the source's rules cannot apply.
  const hasSource = (SOURCES as readonly string[]).includes(spec.source);
  const required = new Set(requiredFields(hasSource ? spec.source : null, spec.type));

  for (const field of SPEC_FIELDS) {
    const value = spec[field];
    if (required.has(field)) {
      const missing = mustBeInRequest.has(field)
        ? !isSet(request[field]) && request[field] !== 0
        : !isSet(value) && value !== 0;
      if (missing) {
        add(field, `${field} is a required field`);
        continue;
      }
    }
    const sources = FIELD_SOURCES[field];
    if (sources && hasSource && isSet(value) && !sources.includes(spec.source)) {
      // Rule 5 of the spec answers ops_json for another source with a 500; see businessRuleViolation.
      add(field, `${field} is only allowed for ${sourceList(sources)}`);
      continue;
    }
    switch (field) {
      case 'name': {
        // A patch checks a name it changes; one it keeps may be Berth's own (a preview's "App (PR#7)").
        if (mode === 'patch' && request.name === undefined) break;
        if (typeof spec.name !== 'string') {
          add('name', 'name is a required field');
          break;
        }
        const error = checkName(spec.name, mode);
        if (error) add('name', error);
        break;
      }
      case 'source':
        if (!hasSource) add('source', 'source is a required field');
        break;
      case 'cron_schedule':
        if (spec.cron_schedule && !isCronExpression(spec.cron_schedule)) {
          add(field, 'cron_schedule must be a cron expression such as "*/5 * * * *"');
        }
        break;
      case 'cpu_count_max':
        if (
          spec.cpu_count_max !== null &&
          spec.cpu_count_min !== null &&
          spec.cpu_count_max < spec.cpu_count_min
        ) {
          add(field, 'cpu_count_max must be at least cpu_count_min');
        }
        break;
      case 'memory_mb_max':
        if (
          spec.memory_mb_max !== null &&
          spec.memory_mb_min !== null &&
          spec.memory_mb_max < spec.memory_mb_min
        ) {
          add(field, 'memory_mb_max must be at least memory_mb_min');
        }
        break;
      case 'git_repo_full_name':
        if (spec.git_repo_full_name && !isGitRepoName(spec.git_repo_full_name))
          add(field, GIT_REPO_NAME_RULE);
        break;
      case 'auto_deploy':
        if (spec.auto_deploy === true && spec.type === 'job')
          add(field, 'auto_deploy cannot be set when type is job');
        break;
      case 'enable_previews':
        if (spec.enable_previews && spec.type !== 'web')
          add(field, 'enable_previews is only allowed when type is web');
        break;
      case 'ops_json':
        if (spec.ops_json !== null && spec.source === 'docker_image') {
          for (const e of parseOpsJson(spec.ops_json, 'ops_json', spec.type).errors) add(e.field, e.error);
        }
        break;
      case 'docker_registry':
        if (spec.docker_registry && !REGISTRY.test(spec.docker_registry)) {
          add(
            field,
            'docker_registry must be a registry host such as registry.example.com or localhost:5000',
          );
        }
        break;
      case 'docker_image':
        if (spec.docker_image && !IMAGE_REPOSITORY.test(spec.docker_image)) {
          add(
            field,
            'docker_image must be an image repository such as org/app, without a tag (a deploy names the tag)',
          );
        }
        break;
    }
  }
  return errors;
}

function pick(input: SpecInput): Partial<ServiceSpec> {
  const out: Record<string, unknown> = {};
  for (const field of SPEC_FIELDS) if (input[field] !== undefined) out[field] = input[field];
  return out as Partial<ServiceSpec>;
}

function unset<K extends keyof OptionalSpec>(spec: OptionalSpec, field: K): void {
  spec[field] = EMPTY_SPEC[field];
}

/** Create: the spec's table. Returns the spec to store, or the field errors. */
export function checkCreate(input: SpecInput): { spec: ServiceSpec; errors: FieldError[] } {
  const request = normalize(input);
  const spec = { ...EMPTY_SPEC, ...pick(request) } as ServiceSpec;
  spec.is_protected = spec.is_protected ?? false;
  spec.enable_previews = spec.enable_previews ?? false;
  spec.enable_code_review = spec.enable_code_review ?? false;
  return { spec, errors: checkSpec(spec, 'create', request, new Set()) };
}

/**
 * PATCH: the merged result must pass the create rules (names may also hold hyphens). A change of source
 * clears the fields that belong only to the old source and requires the new source's own fields (where
 * the code comes from) in the same request; resources already set carry over.
 */
export function checkPatch(
  current: ServiceSpec,
  input: SpecInput,
): { spec: ServiceSpec; errors: FieldError[] } {
  const request = normalize(input);
  const merged = { ...current } as ServiceSpec;
  const sourceChanged = request.source !== undefined && request.source !== current.source;
  if (sourceChanged) {
    for (const field of SPEC_FIELDS) {
      if (field === 'name' || field === 'source') continue;
      const sources = FIELD_SOURCES[field];
      if (sources && !sources.includes(request.source as Source)) unset(merged, field);
    }
  }
  // ops_json belongs to docker_image only; rule 5 would otherwise fire on a field the caller did not send.
  if (sourceChanged && request.source !== 'docker_image' && request.ops_json === undefined)
    merged.ops_json = null;
  Object.assign(merged, pick(request));
  for (const flag of ['is_protected', 'enable_previews', 'enable_code_review'] as const)
    merged[flag] = merged[flag] ?? false;
  const mustBeInRequest = new Set(sourceChanged ? sourceFieldsOf(merged.source) : []);
  return { spec: merged, errors: checkSpec(merged, 'patch', request, mustBeInRequest) };
}

/** Rule 5 of Create Service: ops_json with a source other than docker_image is a 500 `validation`. */
export function businessRuleViolation(spec: ServiceSpec): string | null {
  if (isSet(spec.ops_json) && spec.source !== 'docker_image') {
    return 'Ops Json is only supported for docker image source';
  }
  return null;
}

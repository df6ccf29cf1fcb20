import {
  FIELD_SOURCES,
  SERVICE_TYPES,
  type ServiceType,
  SOURCES,
  type Source,
  type SpecField,
} from '../../src/domain/service-fields.ts';
import { requiredFields } from '../../src/domain/service-requirements.ts';
import type { FieldErrors } from './api.ts';
import { inLabel } from './form-errors.tsx';
import { CheckboxField, SelectField, TextAreaField, TextField } from './ui.tsx';

/**
 * How the console shows a service's fields. Which source a field belongs to and which fields are
 * required come from the API's own rules (`service-fields.ts`, `service-requirements.ts`); this table
 * only says how each field looks.
 */
type Kind = 'text' | 'integer' | 'number' | 'boolean' | 'textarea';
interface FormField {
  field: SpecField;
  label: string;
  kind: Kind;
  group: 'source' | 'run' | 'resources' | 'options';
  hint?: string;
  /** Shown for these types only (a field the type requires, and nothing else). */
  types?: readonly ServiceType[];
  /** Shown for these sources only, where the API's rule is not a source list (ops_json, rule 5). */
  sources?: readonly Source[];
}

export const FORM_FIELDS: readonly FormField[] = [
  { field: 'git_repo_full_name', label: 'Repository', kind: 'text', group: 'source', hint: 'org/repo' },
  { field: 'git_repo_branch', label: 'Branch', kind: 'text', group: 'source' },
  {
    field: 'docker_registry',
    label: 'Registry',
    kind: 'text',
    group: 'source',
    hint: 'registry.example.com or localhost:5000; empty for Docker Hub',
  },
  {
    field: 'docker_image',
    label: 'Image',
    kind: 'text',
    group: 'source',
    hint: 'org/app, without a tag: a deploy names the tag',
  },
  { field: 'helm_chart_repo', label: 'Chart repository', kind: 'text', group: 'source' },
  { field: 'helm_chart_name', label: 'Chart name', kind: 'text', group: 'source' },
  { field: 'helm_values_yml', label: 'values.yaml', kind: 'textarea', group: 'source' },
  { field: 'dockerfile_path', label: 'Dockerfile path', kind: 'text', group: 'source' },
  { field: 'build_context', label: 'Build context', kind: 'text', group: 'source' },
  { field: 'port', label: 'Port', kind: 'integer', group: 'run', types: ['web', 'internal'] },
  {
    field: 'cron_schedule',
    label: 'Cron schedule',
    kind: 'text',
    group: 'run',
    hint: 'e.g. */5 * * * *',
    types: ['cron'],
  },
  { field: 'run_command', label: 'Run command', kind: 'text', group: 'run' },
  { field: 'ops_json_path', label: 'ops.json path', kind: 'text', group: 'run' },
  {
    field: 'ops_json',
    label: 'ops.json',
    kind: 'textarea',
    group: 'run',
    hint: 'inline configuration (docs/ops-json.md)',
    sources: ['docker_image'],
  },
  { field: 'replica_count', label: 'Replicas', kind: 'integer', group: 'resources' },
  { field: 'cpu_count_min', label: 'CPU (min)', kind: 'number', group: 'resources', hint: 'cores, e.g. 0.5' },
  { field: 'cpu_count_max', label: 'CPU (max)', kind: 'number', group: 'resources' },
  { field: 'memory_mb_min', label: 'Memory MB (min)', kind: 'integer', group: 'resources' },
  { field: 'memory_mb_max', label: 'Memory MB (max)', kind: 'integer', group: 'resources' },
  { field: 'auto_deploy', label: 'Deploy each push to the branch', kind: 'boolean', group: 'options' },
  {
    field: 'enable_previews',
    label: 'Preview services for pull requests',
    kind: 'boolean',
    group: 'options',
  },
  { field: 'enable_code_review', label: 'Code review', kind: 'boolean', group: 'options' },
  { field: 'is_protected', label: 'Protected (cannot be deleted)', kind: 'boolean', group: 'options' },
];

const GROUPS = [
  ['source', 'Source'],
  ['run', 'How it runs'],
  ['resources', 'Resources'],
  ['options', 'Options'],
] as const;

export type FormValues = Record<string, string | boolean>;

/** The service's values as the form holds them: text for inputs, booleans for checkboxes. */
export function formValuesOf(service: Record<string, unknown>): FormValues {
  const values: FormValues = {
    name: String(service.name ?? ''),
    source: String(service.source ?? 'docker_image'),
    type: service.type ? String(service.type) : '',
  };
  for (const f of FORM_FIELDS) {
    const value = service[f.field];
    values[f.field] =
      f.kind === 'boolean' ? value === true : value === null || value === undefined ? '' : String(value);
  }
  return values;
}

export function isShown(f: FormField, values: FormValues): boolean {
  const source = values.source as Source;
  const type = (values.type || null) as ServiceType | null;
  const sources = f.sources ?? FIELD_SOURCES[f.field];
  if (sources && !sources.includes(source)) return false;
  if (f.types && !(type && f.types.includes(type)))
    return values[f.field] !== '' && values[f.field] !== false;
  return true;
}

/** What the API takes for a field's text: a number where it wants one, null for empty. */
export function apiValue(f: FormField, value: string | boolean): unknown {
  if (f.kind === 'boolean') return value === true;
  const text = String(value);
  if (text.trim() === '') return null;
  if (f.kind === 'integer' || f.kind === 'number') {
    const n = Number(text);
    // Not a number: sent as typed, so the API's own field error says what is wrong.
    return Number.isFinite(n) ? n : text;
  }
  return text;
}

export function ServiceFields(props: {
  values: FormValues;
  errors: FieldErrors;
  onChange: (field: string, value: string | boolean) => void;
  /** Create: the source can be chosen; a PATCH may change it too. */
  idPrefix: string;
}) {
  const { values, errors, onChange, idPrefix } = props;
  const required = new Set<string>(
    requiredFields(values.source as Source, (values.type || null) as ServiceType | null),
  );
  const id = (field: string) => `${idPrefix}-${field}`;
  return (
    <>
      <div class="grid-2">
        <TextField
          id={id('name')}
          label="Name"
          value={String(values.name)}
          onInput={(v) => onChange('name', v)}
          error={inLabel(errors.name, 'name', 'Name')}
          required
          hint="3 to 50 letters and spaces"
        />
        <SelectField
          id={id('source')}
          label="Source"
          value={String(values.source)}
          options={SOURCES}
          onChange={(v) => onChange('source', v)}
          error={inLabel(errors.source, 'source', 'Source')}
          required
        />
        <SelectField
          id={id('type')}
          label="Type"
          value={String(values.type)}
          options={[{ value: '', label: 'none' }, ...SERVICE_TYPES]}
          onChange={(v) => onChange('type', v)}
          error={inLabel(errors.type, 'type', 'Type')}
          hint="web and internal need a port; cron a schedule"
        />
      </div>
      {GROUPS.map(([group, legend]) => {
        const fields = FORM_FIELDS.filter((f) => f.group === group && isShown(f, values));
        if (!fields.length) return null;
        return (
          <fieldset key={group}>
            <legend>{legend}</legend>
            <div class="grid-2">
              {fields.map((f) => {
                const common = {
                  id: id(f.field),
                  label: f.label,
                  hint: f.hint,
                  error: inLabel(errors[f.field], f.field, f.label),
                  required: required.has(f.field),
                };
                if (f.kind === 'boolean')
                  return (
                    <CheckboxField
                      key={f.field}
                      {...common}
                      checked={values[f.field] === true}
                      onChange={(v) => onChange(f.field, v)}
                    />
                  );
                if (f.kind === 'textarea')
                  return (
                    <TextAreaField
                      key={f.field}
                      {...common}
                      value={String(values[f.field] ?? '')}
                      onInput={(v) => onChange(f.field, v)}
                    />
                  );
                return (
                  <TextField
                    key={f.field}
                    {...common}
                    value={String(values[f.field] ?? '')}
                    onInput={(v) => onChange(f.field, v)}
                    attrs={
                      f.kind === 'text'
                        ? { spellcheck: false }
                        : { inputMode: f.kind === 'integer' ? 'numeric' : 'decimal' }
                    }
                  />
                );
              })}
            </div>
          </fieldset>
        );
      })}
    </>
  );
}

/** The errors no shown field can carry (a hidden field, a nested one): listed above the form. */
export function unplacedErrors(errors: FieldErrors, values: FormValues): [string, string][] {
  const placed = new Set([
    'name',
    'source',
    'type',
    ...FORM_FIELDS.filter((f) => isShown(f, values)).map((f) => f.field),
  ]);
  return Object.entries(errors).filter(([field]) => !placed.has(field));
}

import { useState } from 'preact/hooks';
import { api, unwrap } from '../api.ts';
import { FormErrors, inLabel } from '../form-errors.tsx';
import { navigate } from '../router.ts';
import {
  apiValue,
  FORM_FIELDS,
  type FormValues,
  formValuesOf,
  isShown,
  ServiceFields,
  unplacedErrors,
} from '../service-form.tsx';
import type { CreateServiceBody } from '../types.ts';
import { CheckboxField, Page, useSubmit } from '../ui.tsx';

export function CreateService(props: { envId: string }) {
  const { envId } = props;
  const [values, setValues] = useState<FormValues>(() =>
    formValuesOf({ source: 'docker_image', type: 'web' }),
  );
  const [deployNow, setDeployNow] = useState(false);
  const onChange = (field: string, value: string | boolean) => setValues((v) => ({ ...v, [field]: value }));

  const create = useSubmit(
    async () => {
      // Only the fields this source and type show, and only those filled in: the API's defaults do the rest.
      const body: Record<string, unknown> = {
        name: values.name,
        source: values.source,
        type: values.type || null,
        ...(deployNow && { deploy_now: true }),
      };
      for (const f of FORM_FIELDS) {
        if (!isShown(f, values)) continue;
        const value = apiValue(f, values[f.field] ?? '');
        if (value !== null && value !== false) body[f.field] = value;
      }
      return unwrap(
        await api().POST('/v1/environments/{envId}/services', {
          params: { path: { envId } },
          body: body as CreateServiceBody,
        }),
      ).service;
    },
    (service) => navigate(`/envs/${envId}/services/${service.id}`),
  );

  return (
    <Page title="New service">
      <p class="crumbs">
        <a href={`#/envs/${envId}`}>← Environment</a>
      </p>
      <form class="card" onSubmit={create.run} noValidate>
        <FormErrors error={create.error} unplaced={unplacedErrors(create.errors, values)} />
        <ServiceFields values={values} errors={create.errors} onChange={onChange} idPrefix="create" />
        <CheckboxField
          id="create-deploy_now"
          label="Deploy right away"
          checked={deployNow}
          onChange={setDeployNow}
          error={inLabel(create.errors.deploy_now, 'deploy_now', 'Deploy right away')}
        />
        <div class="form-actions">
          <button type="submit" class="primary" disabled={create.busy}>
            {create.busy ? 'Creating…' : 'Create service'}
          </button>
          <a href={`#/envs/${envId}`}>Cancel</a>
        </div>
      </form>
    </Page>
  );
}

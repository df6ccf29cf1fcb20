import { useState } from 'preact/hooks';
import { api, type FieldErrors, fieldErrorsOf, isSignedOut, unwrap } from '../api.ts';
import { FormErrors } from '../form-errors.tsx';
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
import { CheckboxField, Page } from '../ui.tsx';

export function CreateService(props: { envId: string }) {
  const { envId } = props;
  const [values, setValues] = useState<FormValues>(() => ({
    ...formValuesOf({ source: 'docker_image', type: 'web' }),
  }));
  const [deployNow, setDeployNow] = useState(false);
  const [errors, setErrors] = useState<FieldErrors>({});
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);

  const onChange = (field: string, value: string | boolean) => setValues((v) => ({ ...v, [field]: value }));

  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    setErrors({});
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
    try {
      const { service } = unwrap(
        await api().POST('/v1/environments/{envId}/services', {
          params: { path: { envId } },
          body: body as CreateServiceBody,
        }),
      );
      navigate(`/envs/${envId}/services/${service.id}`);
    } catch (e) {
      if (isSignedOut(e)) navigate('/sign-in');
      setError(e);
      setErrors(fieldErrorsOf(e));
    } finally {
      setBusy(false);
    }
  };

  return (
    <Page title="New service">
      <p class="crumbs">
        <a href={`#/envs/${envId}`}>← Environment</a>
      </p>
      <form class="card" onSubmit={submit} noValidate>
        <FormErrors error={error} unplaced={unplacedErrors(errors, values)} />
        <ServiceFields values={values} errors={errors} onChange={onChange} idPrefix="create" />
        <CheckboxField
          id="create-deploy_now"
          label="Deploy right away"
          checked={deployNow}
          onChange={setDeployNow}
          error={errors.deploy_now}
        />
        <div class="form-actions">
          <button type="submit" class="primary" disabled={busy}>
            {busy ? 'Creating…' : 'Create service'}
          </button>
          <a href={`#/envs/${envId}`}>Cancel</a>
        </div>
      </form>
    </Page>
  );
}

import type { Deps } from '../../domain/usecases/context.ts';
import { issueApiCertificateHandler } from '../api-certificate.ts';
import { issueCertificateHandler } from '../certificates.ts';
import { issueIngressCertificateHandler } from '../ingress-certificate.ts';
import type { JobHandlers } from '../worker.ts';
import { deployCustomDomainHandler, retireCustomDomainHandler } from './custom-domains.ts';
import { deleteServiceHandler } from './delete-service.ts';
import { deliverWebhookHandler } from './deliver-webhook.ts';
import { dependencyBackupHandler, dependencyRestoreHandler } from './dependency-backups.ts';
import { deployHandler } from './deploy.ts';
import { provisionEnvironmentHandler } from './provision-environment.ts';
import { writeSecretsHandler } from './write-secrets.ts';

export function jobHandlers(deps: Deps): JobHandlers {
  return {
    provision_environment: provisionEnvironmentHandler(deps),
    deploy: deployHandler(deps),
    delete_service: deleteServiceHandler(deps),
    write_service_secrets: writeSecretsHandler(deps, 'service'),
    write_environment_secrets: writeSecretsHandler(deps, 'environment'),
    deploy_custom_domain: deployCustomDomainHandler(deps),
    retire_custom_domain: retireCustomDomainHandler(deps),
    deliver_webhook: deliverWebhookHandler(deps),
    dependency_backup: dependencyBackupHandler(deps),
    dependency_restore: dependencyRestoreHandler(deps),
    issue_certificate: issueCertificateHandler(deps),
    issue_ingress_certificate: issueIngressCertificateHandler(deps),
    issue_api_certificate: issueApiCertificateHandler(deps),
  };
}

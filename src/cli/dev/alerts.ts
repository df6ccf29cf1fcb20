/**
 * A service's alerts and the rules that open them (docs/metrics.md "Alert rules"). The rules API has no
 * If-Match: `alerts rules set` replaces the service's own settings, and whatever it leaves out takes
 * the default.
 * @module
 */
import fs from 'node:fs';
import { styleText } from 'node:util';
import type { Command } from 'commander';
import { type paths, unwrap } from '../../client/index.ts';
import { withExamples } from '../help.ts';
import { common, noteNextPage, type PageOptions, paged, pageQuery, withSession } from './common.ts';
import { CliError, EXIT } from './errors.ts';
import type { Column } from './output.ts';
import type { Session } from './session.ts';
import { yaml } from './yaml.ts';

type RulesPath = paths['/v1/environments/{envId}/services/{serviceId}/alert-rules'];
type RulesAnswer = RulesPath['get']['responses'][200]['content']['application/json']['data'];
type RulesBody = RulesPath['put']['requestBody']['content']['application/json'];
type Alert =
  paths['/v1/environments/{envId}/services/{serviceId}/alerts']['get']['responses'][200]['content']['application/json']['data']['alerts'][number];

const ALERT_COLUMNS: Column<Alert>[] = [
  { header: 'RULE', value: (a) => a.rule },
  { header: 'STATE', value: (a) => (a.state === 'open' ? styleText('red', a.state) : a.state) },
  { header: 'OPENED', value: (a) => a.opened_at },
  { header: 'RESOLVED', value: (a) => a.resolved_at },
  { header: 'VALUE', value: (a) => a.value },
  { header: 'MESSAGE', value: (a) => a.message },
  { header: 'ID', value: (a) => a.id },
];

interface RuleRow {
  rule: string;
  enabled: string;
  settings: string;
}

const RULE_COLUMNS: Column<RuleRow>[] = [
  { header: 'RULE', value: (r) => r.rule },
  { header: 'ENABLED', value: (r) => r.enabled },
  { header: 'SETTINGS', value: (r) => r.settings },
];

/** Each rule on a line: whether it is on, and its settings, each followed by its default when it differs. */
function ruleRows({ rules, defaults }: RulesAnswer): RuleRow[] {
  const shown = (value: unknown) => (value === true ? 'yes' : value === false ? 'no' : String(value));
  const withDefault = (value: unknown, byDefault: unknown) =>
    value === byDefault ? shown(value) : `${shown(value)} (default ${shown(byDefault)})`;
  return Object.entries(rules).map(([rule, fields]) => {
    const own = fields as Record<string, unknown>;
    const standard = defaults[rule as keyof RulesAnswer['defaults']] as Record<string, unknown>;
    const settings = Object.entries(own)
      .filter(([field]) => field !== 'enabled')
      .map(([field, value]) => `${field} ${withDefault(value, standard[field])}`);
    return { rule, enabled: withDefault(own.enabled, standard.enabled), settings: settings.join(', ') };
  });
}

function showRules(session: Session, data: RulesAnswer) {
  session.out.list(ruleRows(data), RULE_COLUMNS, data);
}

/** A setting's value as typed: true or false, else a number; anything else is a usage error. */
function settingValue(pair: string, value: string): boolean | number {
  if (value === 'true' || value === 'false') return value === 'true';
  if (value.trim() !== '' && Number.isFinite(Number(value))) return Number(value);
  throw new CliError(`${pair}: a setting's value is true, false or a number`, EXIT.usage);
}

/**
 * The settings of a file (JSON or YAML: the PUT body, or what `alerts rules -o yaml` prints, whose
 * `rules` are taken and `defaults` left), with RULE.FIELD=VALUE pairs set over them.
 */
function settingsOf(file: string | undefined, pairs: string[]): RulesBody {
  let settings: Record<string, Record<string, unknown>> = {};
  if (file !== undefined) {
    let parsed: unknown;
    try {
      parsed = yaml().parse(fs.readFileSync(file, 'utf8'));
    } catch (error) {
      throw new CliError(`cannot read ${file}: ${(error as Error).message}`, EXIT.usage);
    }
    if (parsed !== null && typeof parsed === 'object' && 'rules' in parsed) parsed = parsed.rules;
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      throw new CliError(
        `${file} holds no settings: expected an object such as memory_high: {percent: 80}`,
        EXIT.usage,
      );
    }
    settings = parsed as typeof settings;
  }
  for (const pair of pairs) {
    const match = /^([a-z_]+)\.([a-z_]+)=(.*)$/.exec(pair);
    if (!match)
      throw new CliError(`"${pair}" is not RULE.FIELD=VALUE (e.g. memory_high.percent=80)`, EXIT.usage);
    const [, rule = '', field = '', value = ''] = match;
    settings[rule] = { ...settings[rule], [field]: settingValue(pair, value) };
  }
  return settings as RulesBody;
}

async function rulesPath(session: Session, reference: string) {
  const { env, service } = await session.service(reference);
  return { envId: env.id, serviceId: service.id };
}

export function alertCommands(program: Command): void {
  const alerts = withExamples(
    program
      .command('alerts')
      .description("a service's alerts and the rules that open them (docs/metrics.md)"),
    'alerts ls "hello web"',
  );
  withExamples(
    paged(common(alerts.command('ls <service>').description("the service's alerts, newest opened first"))),
    'alerts ls "hello web"',
    'alerts ls "hello web" -o json',
  ).action(
    withSession<[string], PageOptions>(async (session, [reference], o) => {
      const data = unwrap(
        await session.api.GET('/v1/environments/{envId}/services/{serviceId}/alerts', {
          params: { path: await rulesPath(session, reference), query: pageQuery(o) },
        }),
      );
      session.out.list(data.alerts, ALERT_COLUMNS, data);
      noteNextPage(
        session,
        data.next_cursor,
        `alerts ls ${JSON.stringify(reference)}${o.limit ? ` --limit ${o.limit}` : ''}`,
      );
    }),
  );
  const rules = withExamples(
    common(
      alerts
        .command('rules <service>')
        .description("the service's alert rules: each one's settings, and the default where it differs"),
    ),
    'alerts rules "hello web"',
    'alerts rules "hello web" -o yaml > rules.yaml',
  ).action(
    withSession(async (session, [reference = '']) => {
      const path = await rulesPath(session, reference);
      showRules(
        session,
        unwrap(
          await session.api.GET('/v1/environments/{envId}/services/{serviceId}/alert-rules', {
            params: { path },
          }),
        ),
      );
    }),
  );
  withExamples(
    common(
      rules
        .command('set <service> [settings...]')
        .description("replace the service's alert settings: every rule and field not given takes its default")
        .option(
          '-f, --file <file>',
          'the settings as JSON or YAML (what alerts rules -o yaml prints will do)',
        )
        .option('--defaults', 'put every rule back to its defaults'),
    ),
    'alerts rules set "hello web" memory_high.percent=80 error_rate_high.enabled=false',
    'alerts rules set "hello web" -f rules.yaml',
    'alerts rules set "hello web" --defaults',
  ).action(
    withSession<[string, string[]], { file?: string; defaults?: boolean }>(
      async (session, [reference, pairs], o) => {
        const given = o.file !== undefined || pairs.length > 0;
        if (Boolean(o.defaults) === given) {
          throw new CliError(
            o.defaults
              ? '--defaults takes no other settings: it puts every rule back to its defaults'
              : 'give RULE.FIELD=VALUE settings, -f FILE, or --defaults (whatever is left out takes its default)',
            EXIT.usage,
          );
        }
        const body = settingsOf(o.file, pairs);
        const data = unwrap(
          await session.api.PUT('/v1/environments/{envId}/services/{serviceId}/alert-rules', {
            params: { path: await rulesPath(session, reference) },
            body,
          }),
        );
        session.out.notice(
          `replaced the alert settings of ${reference}: whatever was left out takes its default`,
        );
        showRules(session, data);
      },
    ),
  );
}

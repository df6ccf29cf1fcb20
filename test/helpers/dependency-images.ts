import { spawn } from 'node:child_process';
import path from 'node:path';

/**
 * The docker provider's default dependency images (berth-deps/{postgres,mariadb,redis,s3}:latest),
 * built by tools/dependency-images/build.sh from Debian's mirror, once per content hash: a second call
 * (or a second suite) finds them built and returns at once.
 */
export async function buildDependencyImages(): Promise<void> {
  const script = path.resolve(import.meta.dirname, '../../tools/dependency-images/build.sh');
  const child = spawn('bash', [script], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr.on('data', (chunk) => {
    output += chunk;
  });
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  if (code !== 0)
    throw new Error(`tools/dependency-images/build.sh failed (${code}):\n${output.slice(-4000)}`);
}

/**
 * The service's S3 client (the image has the Node that runs s3rver, no SDK): puts one object for this
 * visit and prints how many visit objects the bucket holds, each request signed with AWS Signature
 * Version 4 and the exported key pair, as any S3 client signs.
 */
export const S3_VISIT = `const crypto = require('node:crypto');
const { BUCKET_ENDPOINT, BUCKET_NAME, BUCKET_KEY_ID, BUCKET_SECRET } = process.env;
const sha256 = (data) => crypto.createHash('sha256').update(data).digest('hex');
const hmac = (key, data) => crypto.createHmac('sha256', key).update(data).digest();
async function s3(method, key, query, body = '') {
  const url = new URL(BUCKET_ENDPOINT + '/' + BUCKET_NAME + (key ? '/' + key : ''));
  for (const [name, value] of Object.entries(query)) url.searchParams.set(name, value);
  url.searchParams.sort();
  const date = new Date().toISOString().replace(/[-:]|[.][0-9]{3}/g, '');
  const scope = date.slice(0, 8) + '/us-east-1/s3/aws4_request';
  const headers = { host: url.host, 'x-amz-content-sha256': sha256(body), 'x-amz-date': date };
  const names = Object.keys(headers).sort();
  const canonical = [method, url.pathname, url.searchParams.toString().replace(/[+]/g, '%20'),
    names.map((n) => n + ':' + headers[n] + '\\n').join(''), names.join(';'), headers['x-amz-content-sha256']].join('\\n');
  const toSign = ['AWS4-HMAC-SHA256', date, scope, sha256(canonical)].join('\\n');
  let signingKey = 'AWS4' + BUCKET_SECRET;
  for (const part of scope.split('/')) signingKey = hmac(signingKey, part);
  const signature = crypto.createHmac('sha256', signingKey).update(toSign).digest('hex');
  const authorization = 'AWS4-HMAC-SHA256 Credential=' + BUCKET_KEY_ID + '/' + scope +
    ', SignedHeaders=' + names.join(';') + ', Signature=' + signature;
  const res = await fetch(url, { method, body: body || undefined, headers: { ...headers, authorization } });
  const text = await res.text();
  if (!res.ok) throw new Error(method + ' ' + url + ' -> ' + res.status + ' ' + text);
  return text;
}
(async () => {
  await s3('PUT', 'visits/' + process.argv[2], {}, 'visit ' + process.argv[2]);
  const listed = await s3('GET', '', { 'list-type': '2', prefix: 'visits/' });
  console.log(listed.match(/<KeyCount>([0-9]+)<[/]KeyCount>/)[1]);
})().catch((error) => { console.error(error.message); process.exit(1); });
`;

/** From another environment: no dependency answers by its name or its address (each probe must fail). */
export const OUTSIDER = `for target in "$PG_NAME" "$PG_IP"; do pg_isready -h "$target" -t 3; [ $? = 2 ] || exit 1; done
for target in "$REDIS_NAME" "$REDIS_IP"; do timeout 3 redis-cli -h "$target" PING && exit 1; done
for target in "$S3_NAME" "$S3_IP"; do
  timeout 3 node -e "fetch('http://$target:4568/').then(() => process.exit(0), () => process.exit(1))" && exit 1
done
echo "no dependency of the other environment answered"
`;

/**
 * What the visitor programs use (VISIT, S3_VISIT): postgres, mariadb, redis and a bucket, with the
 * exports they read.
 */
export const VISITOR_DEPENDENCIES = {
  rds: {
    instances: [
      {
        id: 'main-db',
        prefix: 'userdata',
        engine: 'postgres',
        version: '17.5',
        exports: {
          DB_HOST: '$address',
          DB_PORT: '$port',
          DB_ENDPOINT: '$endpoint',
          DB_USER: '$username',
          DB_PASSWORD_ARN: '$passwordArn',
          DB_PASSWORD: '$password',
          DB_NAME: '$dbName',
          DB_ARN: '$arn',
        },
      },
      {
        id: 'legacy-db',
        prefix: 'legacy',
        engine: 'mysql',
        exports: { MY_HOST: '$address', MY_USER: '$username', MY_PASSWORD: '$password', MY_DB: '$dbName' },
      },
    ],
  },
  elasticache: {
    clusters: [
      { id: 'cache', prefix: 'sessions', engine: 'redis', exports: { REDIS_ENDPOINT: '$endpoint' } },
    ],
  },
  s3: {
    buckets: [
      {
        id: 'attachments',
        prefix: 'attachments',
        exports: {
          BUCKET_NAME: '$name',
          BUCKET_ENDPOINT: '$endpoint',
          BUCKET_KEY_ID: '$username',
          BUCKET_SECRET: '$password',
        },
      },
    ],
  },
};

/**
 * The service's program, in an image made from the postgres dependency image (psql, the mariadb client
 * and redis-cli): counts its visit in each store (MariaDB unless left out) and fails, with what it saw,
 * unless every count is $1.
 */
export function visitScript(stores: { mariadb: boolean }): string {
  const mariadb = stores.mariadb
    ? `my="mariadb -h $MY_HOST -u $MY_USER -p$MY_PASSWORD $MY_DB"
$my -e "CREATE TABLE IF NOT EXISTS visits (n int); INSERT INTO visits VALUES (1)"
myrows=$($my -N -e "SELECT count(*) FROM visits")
`
    : 'myrows=$1\n';
  return `set -e
export PGPASSWORD="$DB_PASSWORD"
pg="host=$DB_HOST port=$DB_PORT user=$DB_USER dbname=$DB_NAME"
psql "$pg" -v ON_ERROR_STOP=1 -qc "CREATE TABLE IF NOT EXISTS visits (at timestamptz DEFAULT now()); INSERT INTO visits DEFAULT VALUES"
rows=$(psql "$pg" -tAc "SELECT count(*) FROM visits")
${mariadb}hits=$(redis-cli -u "redis://$REDIS_ENDPOINT" INCR visits)
objects=$(node /s3-visit.cjs "$1")
echo "postgres=$rows mariadb=$myrows redis=$hits s3=$objects"
[ "$rows/$myrows/$hits/$objects" = "$1/$1/$1/$1" ]
`;
}

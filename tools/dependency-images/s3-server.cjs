// s3rver with the key pair Berth generated (S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, or
// S3_SECRET_ACCESS_KEY_FILE: a file that holds it, a swarm secret) and the bucket S3_BUCKET, keeping
// objects in /data (a volume). Unsigned requests are also served, as s3rver does.
const fs = require('node:fs');
const S3rver = require('s3rver');
const { DUMMY_ACCOUNT } = require('s3rver/lib/models/account');

const { S3_SECRET_ACCESS_KEY_FILE: secretFile } = process.env;
const secret = secretFile ? fs.readFileSync(secretFile, 'utf8') : process.env.S3_SECRET_ACCESS_KEY;
DUMMY_ACCOUNT.createKeyPair(process.env.S3_ACCESS_KEY_ID, secret);
new S3rver({
  address: '0.0.0.0',
  port: 4568,
  directory: '/data',
  configureBuckets: [{ name: process.env.S3_BUCKET, configs: [] }],
})
  .run()
  .catch((error) => {
    console.error(error);
    process.exit(1);
  });
process.on('SIGTERM', () => process.exit(0));

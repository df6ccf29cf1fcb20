// s3rver with the key pair Berth generated (S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY) and the bucket
// S3_BUCKET, keeping objects in /data (a volume). Unsigned requests are also served, as s3rver does.
const S3rver = require('s3rver');
const { DUMMY_ACCOUNT } = require('s3rver/lib/models/account');

DUMMY_ACCOUNT.createKeyPair(process.env.S3_ACCESS_KEY_ID, process.env.S3_SECRET_ACCESS_KEY);
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

#!/bin/sh
# The minio-init service of compose.yaml (docs/deploy.md, "Docker Compose"), run by the minio/mc image
# at every `docker compose up`; every step can be run again.
#   1. the bucket, private (no anonymous access: files are served through the app's access checks);
#   2. the policy "workbench-bucket": objects of that one bucket (get, put, delete, abort an upload)
#      and listing that bucket; nothing else (no other bucket, no admin action);
#   3. the MinIO user MINIO_WORKBENCH_USER with that policy alone: the keys the web nodes and workers
#      get. A changed MINIO_WORKBENCH_PASSWORD replaces the old one at the next run.
# The root account (MINIO_ROOT_USER / MINIO_ROOT_PASSWORD) is used here only, never by the app.
# tests/test_compose.py runs this file with a stand-in `mc` and reads the policy it writes.
set -eu

root_user="${MINIO_ROOT_USER:?set MINIO_ROOT_USER}"
root_password="${MINIO_ROOT_PASSWORD:?set MINIO_ROOT_PASSWORD}"
app_user="${MINIO_WORKBENCH_USER:?set MINIO_WORKBENCH_USER}"
app_password="${MINIO_WORKBENCH_PASSWORD:?set MINIO_WORKBENCH_PASSWORD}"
bucket="${WORKBENCH_S3_BUCKET:?set WORKBENCH_S3_BUCKET}"
endpoint="${MINIO_ENDPOINT:-http://minio:9000}"
policy="workbench-bucket"
policy_file="${TMPDIR:-/tmp}/workbench-bucket-policy.json"

fail() {
    printf 'minio-init: %s\n' "$1" >&2
    exit 1
}

# An S3 bucket name is lower-case letters, digits, dots and hyphens: nothing that could widen the
# policy's resources (a "*") or leave its JSON string.
case "$bucket" in
    *[!a-z0-9.-]*) fail "WORKBENCH_S3_BUCKET=$bucket is not a bucket name (a-z, 0-9, '.', '-')" ;;
esac
[ "${#bucket}" -ge 3 ] && [ "${#bucket}" -le 63 ] || fail "WORKBENCH_S3_BUCKET must be 3 to 63 characters"
[ "$app_user" != "$root_user" ] || fail "MINIO_WORKBENCH_USER must not be the root user MINIO_ROOT_USER"
[ "${#app_password}" -ge 8 ] || fail "MINIO_WORKBENCH_PASSWORD must be at least 8 characters"

mc alias set local "$endpoint" "$root_user" "$root_password" >/dev/null
mc mb --ignore-existing "local/$bucket"
mc anonymous set none "local/$bucket"

# The same policy as docs/deploy.md, "Object storage" (tests/test_compose.py compares them).
printf '%s\n' \
    '{"Version": "2012-10-17", "Statement": [' \
    '  {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],' \
    "   \"Resource\": \"arn:aws:s3:::$bucket/*\"}," \
    '  {"Effect": "Allow", "Action": ["s3:ListBucket"],' \
    "   \"Resource\": \"arn:aws:s3:::$bucket\"}]}" >"$policy_file"
mc admin policy create local "$policy" "$policy_file"

mc admin user add local "$app_user" "$app_password"
# A second attach answers "The specified policy change is already in effect.": nothing to do.
if ! attached=$(mc admin policy attach local "$policy" --user "$app_user" 2>&1); then
    case "$attached" in
        *"already in effect"*) ;;
        *) fail "$attached" ;;
    esac
fi
printf 'minio-init: bucket %s (private), user %s with policy %s\n' "$bucket" "$app_user" "$policy"

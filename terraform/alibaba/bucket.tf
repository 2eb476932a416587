# The rendezvous bucket, when this module creates it (create_bucket = true): private,
# public access blocked, encrypted at rest, records kept while the cluster runs;
# force_destroy so that `terraform destroy` removes it with the records.  An existing
# bucket (create_bucket = false) is left exactly as it is.

resource "alicloud_oss_bucket" "rendezvous" {
  count         = var.create_bucket ? 1 : 0
  bucket        = var.bucket_name
  storage_class = "Standard"
  force_destroy = true
  tags          = local.tags

  server_side_encryption_rule {
    sse_algorithm = "AES256"
  }

  dynamic "versioning" {
    for_each = var.bucket_versioning ? [1] : []
    content {
      status = "Enabled"
    }
  }

  # No rule expires a live record: a cluster reads its head record, token, sealed CA and
  # job packages for as long as it runs, and destroy removes the bucket with them.  Only
  # rewritten records' old versions (bucket_versioning) go.
  dynamic "lifecycle_rule" {
    for_each = var.bucket_versioning ? [1] : []
    content {
      id      = "expire-old-versions"
      prefix  = local.prefix == "" ? "" : "${local.prefix}/"
      enabled = true
      noncurrent_version_expiration {
        days = 1
      }
    }
  }

  lifecycle_rule {
    id      = "abort-incomplete-uploads"
    prefix  = ""
    enabled = true
    abort_multipart_upload {
      days = 1
    }
  }

  #checkov:skip=CKV_ALI_6:OSS-managed AES256 encrypts at rest without a KMS key to pay for and grant to the nodes' role.
  #checkov:skip=CKV_ALI_10:Versioning is optional (bucket_versioning); old versions of rewritten records expire after a day when it is on.
  #checkov:skip=CKV_ALI_12:Access logs need a second bucket; records are short-lived cluster coordination data read only by the cluster's own role.
  #checkov:skip=CKV_ALI_11:Transfer acceleration serves clients far from the region; the nodes use the region's internal endpoint.
}

resource "alicloud_oss_bucket_acl" "rendezvous" {
  count  = var.create_bucket ? 1 : 0
  bucket = alicloud_oss_bucket.rendezvous[0].bucket
  acl    = "private"
}

resource "alicloud_oss_bucket_public_access_block" "rendezvous" {
  count               = var.create_bucket ? 1 : 0
  bucket              = alicloud_oss_bucket.rendezvous[0].bucket
  block_public_access = true
}

# The rendezvous bucket, when this module creates it (create_bucket = true): private,
# public access blocked, encrypted, TLS only, records kept while the cluster runs;
# force_destroy so that `terraform destroy` removes it with the records.  An existing bucket
# (create_bucket = false) is left exactly as it is.

resource "aws_s3_bucket" "rendezvous" {
  count         = var.create_bucket ? 1 : 0
  bucket        = var.bucket_name
  force_destroy = true
  tags          = local.tags
  #checkov:skip=CKV_AWS_18:Access logging needs a second bucket; records are short-lived cluster coordination data and the readers are the cluster's own role.
  #checkov:skip=CKV_AWS_144:Cross-region replication of rendezvous records that live as long as the cluster has no use.
  #checkov:skip=CKV_AWS_145:SSE-S3 (AES256) encrypts at rest without a KMS key to pay for and grant to the nodes; see aws_s3_bucket_server_side_encryption_configuration.
  #checkov:skip=CKV2_AWS_62:No consumer for event notifications; nodes poll the prefix.
}

resource "aws_s3_bucket_public_access_block" "rendezvous" {
  count                   = var.create_bucket ? 1 : 0
  bucket                  = aws_s3_bucket.rendezvous[0].id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_ownership_controls" "rendezvous" {
  count  = var.create_bucket ? 1 : 0
  bucket = aws_s3_bucket.rendezvous[0].id
  rule {
    object_ownership = "BucketOwnerEnforced" # ACLs off
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "rendezvous" {
  count  = var.create_bucket ? 1 : 0
  bucket = aws_s3_bucket.rendezvous[0].id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "AES256"
    }
  }
}

resource "aws_s3_bucket_versioning" "rendezvous" {
  count  = var.create_bucket && var.bucket_versioning ? 1 : 0
  bucket = aws_s3_bucket.rendezvous[0].id
  versioning_configuration {
    status = "Enabled"
  }
}

# Only with versioning.  No rule expires a current record: a cluster reads its head
# record, token, sealed CA and job packages for as long as it runs (a node that joins on
# day 8 needs them), and destroy removes the bucket with them.  What goes: old versions
# of rewritten records, and (here too) incomplete uploads.  Without versioning there is
# no configuration at all: the provider waits at least 55 s after creating one (10 s,
# then 10 equal reads 5 s apart, in 5.100's bucket_lifecycle_configuration.go), which
# was the tail of every deploy; an upload killed midway keeps its parts until `down`
# deletes the bucket (cents a month for a torch wheelhouse).
resource "aws_s3_bucket_lifecycle_configuration" "rendezvous" {
  count  = var.create_bucket && var.bucket_versioning ? 1 : 0
  bucket = aws_s3_bucket.rendezvous[0].id
  rule {
    id     = "expire-old-versions"
    status = "Enabled"
    filter {
      prefix = local.prefix == "" ? "" : "${local.prefix}/"
    }
    noncurrent_version_expiration {
      noncurrent_days = 1
    }
  }
  rule {
    id     = "abort-incomplete-uploads"
    status = "Enabled"
    filter {}
    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
  }
}

resource "aws_s3_bucket_policy" "rendezvous" {
  count  = var.create_bucket ? 1 : 0
  bucket = aws_s3_bucket.rendezvous[0].id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid       = "DenyInsecureTransport"
      Effect    = "Deny"
      Principal = "*"
      Action    = "s3:*"
      Resource  = [aws_s3_bucket.rendezvous[0].arn, "${aws_s3_bucket.rendezvous[0].arn}/*"]
      Condition = { Bool = { "aws:SecureTransport" = "false" } }
    }]
  })
  # The public access block must exist first, or S3 may judge the policy public.
  depends_on = [aws_s3_bucket_public_access_block.rendezvous]
}

# The rendezvous bucket, when this module creates it (create_bucket = true): uniform
# access, public access prevention enforced, Google-managed encryption at rest,
# records kept while the cluster runs; force_destroy so that `terraform destroy` removes it with the
# records.  An existing bucket (create_bucket = false) is left as it is.

resource "google_storage_bucket" "rendezvous" {
  count                       = var.create_bucket ? 1 : 0
  project                     = var.project
  name                        = var.bucket_name
  location                    = upper(var.region)
  storage_class               = "STANDARD"
  force_destroy               = true
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  labels                      = local.labels

  versioning {
    enabled = var.bucket_versioning
  }

  # No rule deletes a live record: a cluster reads its head record, token, sealed CA and
  # job packages for as long as it runs, and destroy removes the bucket with them.  Only
  # rewritten records' old versions (bucket_versioning) go.
  lifecycle_rule {
    condition {
      days_since_noncurrent_time = 1
      matches_prefix             = local.prefix == "" ? [] : ["${local.prefix}/"]
    }
    action {
      type = "Delete"
    }
  }

  lifecycle_rule {
    condition {
      age = 1
    }
    action {
      type = "AbortIncompleteMultipartUpload"
    }
  }

  # Deleted records need no 7-day soft-delete copy (billed as storage).
  soft_delete_policy {
    retention_duration_seconds = 0
  }

  #checkov:skip=CKV_GCP_62:Access logs need a second bucket; records are short-lived cluster coordination data read only by the cluster's own service account.
  #checkov:skip=CKV_GCP_78:Versioning is optional (bucket_versioning); old versions of rewritten records expire after a day when it is on.
}

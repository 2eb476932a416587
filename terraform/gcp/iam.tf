# The nodes' identity: a service account of their own that may list, read, write and
# delete objects under <prefix>/<cluster_id>/ of the rendezvous bucket, and nothing
# else (one bucket-level binding with an IAM condition; the bucket must use uniform
# bucket-level access, which a created bucket does).

# One per cluster, unless node_service_account names an existing one: a deployer with
# deployer-role.yaml may attach (actAs) that one account only, so cannot create its own.
resource "google_service_account" "nodes" {
  count   = var.node_service_account == null ? 1 : 0
  project = var.project
  # account_id allows 6-30 characters; the cluster name is in the display name.
  account_id   = "syndeo-${substr(sha256(local.cluster_id), 0, 16)}"
  display_name = "Syndeo ${local.cluster_id} nodes"
  description  = "Syndeo cluster ${local.cluster_id}: rendezvous prefix only"
}

resource "google_storage_bucket_iam_member" "rendezvous" {
  bucket = local.bucket
  role   = "roles/storage.objectUser"
  member = "serviceAccount:${local.node_sa}"
  condition {
    title       = "syndeo-${local.cluster_id}-prefix"
    description = "Objects under ${local.cluster_prefix} only; listing only with that prefix"
    expression = join(" || ", [
      "resource.name.startsWith(\"projects/_/buckets/${var.bucket_name}/objects/${local.cluster_prefix}\")",
      "(resource.type == \"storage.googleapis.com/Bucket\" && api.getAttribute(\"storage.googleapis.com/objectListPrefix\", \"\").startsWith(\"${local.cluster_prefix}\"))",
    ])
  }
}

locals {
  node_sa = var.node_service_account != null ? var.node_service_account : google_service_account.nodes[0].email
}

moved {
  from = google_service_account.nodes
  to   = google_service_account.nodes[0]
}

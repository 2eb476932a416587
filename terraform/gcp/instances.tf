# One VM per rank.  Its user-data (the metadata key cloud-init's GCE datasource reads)
# is module.nodes' rendering for that rank, passed through unchanged.

resource "google_compute_instance" "node" {
  count        = var.node_count
  name         = "${local.name}-${count.index}"
  machine_type = var.instance_type
  zone         = local.zone
  tags         = [local.network_tag]
  labels       = merge(local.labels, { syndeo-rank = tostring(count.index) })

  boot_disk {
    auto_delete = true
    initialize_params {
      image  = var.image
      size   = var.disk_size_gb
      type   = "pd-balanced"
      labels = local.labels
    }
  }

  # No access_config block: no external IP.
  network_interface {
    subnetwork = google_compute_subnetwork.nodes.id
  }

  metadata = {
    user-data              = module.nodes.user_data[count.index]
    enable-oslogin         = "TRUE"
    block-project-ssh-keys = "TRUE"
    serial-port-enable     = "FALSE"
  }

  service_account {
    email  = google_service_account.nodes.email
    scopes = ["cloud-platform"] # access is decided by IAM (the prefix-scoped binding)
  }

  shielded_instance_config {
    enable_secure_boot          = true
    enable_vtpm                 = true
    enable_integrity_monitoring = true
  }

  scheduling {
    provisioning_model          = var.spot ? "SPOT" : "STANDARD"
    preemptible                 = var.spot
    automatic_restart           = !var.spot
    on_host_maintenance         = var.spot || var.gpus_per_node > 0 ? "TERMINATE" : "MIGRATE"
    instance_termination_action = var.spot ? "DELETE" : null
  }

  allow_stopping_for_update = true
  deletion_protection       = false

  #checkov:skip=CKV_GCP_38:Boot disks are encrypted at rest with Google-managed keys; customer-supplied keys would have to be handed to every VM start.
  depends_on = [google_storage_bucket_iam_member.rendezvous]
}

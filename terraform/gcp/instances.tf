# One VM per rank.  Its user-data (the metadata key cloud-init's GCE datasource reads)
# is module.nodes' rendering for that rank, passed through unchanged.

# Why count and not a for_each per group: a rank is an index everywhere -- the node
# module renders user-data, env and groups as lists by rank, and node_ips/node_ids are
# read by rank -- so instance N is rank N, and its group (hence its type) is looked up
# from module.nodes.groups[N].  Instances keyed by group would give the same machines
# under other addresses, with the rank -> index mapping to redo in every output.
locals {
  group_of_name = { for g in var.groups : g.name => g }
  # Per rank: its group's instance_type, else the top-level instance_type.
  instance_types = [for name in module.nodes.groups :
    name == null ? var.instance_type : coalesce(local.group_of_name[name].instance_type, var.instance_type)
  ]
  # GPUs cannot live-migrate: a rank whose group has GPUs, or whose machine type is
  # accelerator-optimized (GPUs attached: A2/A3/A4/A4X/G2/G4), stops for host maintenance.
  gpu_ranks = [for i, name in module.nodes.groups :
    (name == null ? var.gpus_per_node : local.group_of_name[name].gpus) > 0
    || can(regex("^(a2|a3|a4|a4x|g2|g4)-", local.instance_types[i]))
  ]
}

resource "google_compute_instance" "node" {
  count        = var.node_count
  name         = "${local.name}-${count.index}"
  machine_type = local.instance_types[count.index]
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
    on_host_maintenance         = var.spot || local.gpu_ranks[count.index] ? "TERMINATE" : "MIGRATE"
    instance_termination_action = var.spot ? "DELETE" : null
  }

  allow_stopping_for_update = true
  deletion_protection       = false

  #checkov:skip=CKV_GCP_38:Boot disks are encrypted at rest with Google-managed keys; customer-supplied keys would have to be handed to every VM start.
  depends_on = [google_storage_bucket_iam_member.rendezvous]
}

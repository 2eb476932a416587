# One VM per rank.  Its user-data (the metadata key cloud-init's GCE datasource reads)
# is module.nodes' rendering for that rank, passed through unchanged.

# Why for_each keyed by rank and not count: `grow` adds nodes (node.grown, ranks past
# node_count) and `shrink` removes any of them, so instances are addressed by their
# rank ("0", "1", ..., "12"): removing rank 12 never shifts rank 13 to another
# address, as count would (replacing a running node).  Not keyed by group either: a
# rank is an index everywhere (the node module renders user-data, env and groups as
# lists by rank; node_ips/node_ids are read by rank), so the outputs stay lists by rank.
locals {
  # Every node keyed by its rank: the cluster's own ranks, then the nodes `grow` added.
  machines = module.nodes.machines
  # Per node: its group's instance_type, else the top-level instance_type.
  machine_types = { for k, m in local.machines :
    k => m.group == null ? var.instance_type : lookup(var.group_instance_types, m.group, var.instance_type)
  }
  # The cluster's own ranks in rank order (output instance_types).
  instance_types = [for i, _ in module.nodes.groups : local.machine_types[tostring(i)]]
  # GPUs cannot live-migrate: a node whose group has GPUs, or whose machine type is
  # accelerator-optimized (GPUs attached: A2/A3/A4/A4X/G2/G4), stops for host maintenance.
  gpu_machines = { for k, m in local.machines :
    k => m.gpus > 0 || can(regex("^(a2|a3|a4|a4x|g2|g4)-", local.machine_types[k]))
  }
}

resource "google_compute_instance" "node" {
  for_each     = local.machines
  project      = var.project
  name         = "${local.name}-${each.key}"
  machine_type = local.machine_types[each.key]
  zone         = local.zone
  tags         = [local.network_tag]
  labels       = merge(local.labels, { syndeo-rank = each.key })

  boot_disk {
    auto_delete = true
    initialize_params {
      image  = var.image
      size   = var.disk_size_gb
      type   = local.boot_disk_type[local.machine_types[each.key]] # disk.tf
      labels = local.labels
    }
  }

  # No access_config block: no external IP.
  network_interface {
    subnetwork = google_compute_subnetwork.nodes.id
  }

  metadata = {
    user-data              = each.value.user_data
    enable-oslogin         = "TRUE"
    block-project-ssh-keys = "TRUE"
    serial-port-enable     = "FALSE"
  }

  service_account {
    email  = local.node_sa
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
    on_host_maintenance         = var.spot || local.gpu_machines[each.key] ? "TERMINATE" : "MIGRATE"
    instance_termination_action = var.spot ? "DELETE" : null
  }

  allow_stopping_for_update = true
  deletion_protection       = false

  #checkov:skip=CKV_GCP_38:Boot disks are encrypted at rest with Google-managed keys; customer-supplied keys would have to be handed to every VM start.
  depends_on = [google_storage_bucket_iam_member.rendezvous]
}

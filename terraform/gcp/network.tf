# A VPC of its own with one subnet.  No Cloud NAT and no external IPs: the image is
# baked, and the only service the nodes use is Cloud Storage, reached through Private
# Google Access.  The metadata server (identity, DNS) needs no route.

resource "google_compute_network" "this" {
  project                 = var.project
  name                    = local.name
  auto_create_subnetworks = false
  routing_mode            = "REGIONAL"
}

resource "google_compute_subnetwork" "nodes" {
  project                  = var.project
  name                     = "${local.name}-nodes"
  network                  = google_compute_network.this.id
  region                   = var.region
  ip_cidr_range            = cidrsubnet(var.network_cidr, 20 - tonumber(split("/", var.network_cidr)[1]), 0)
  private_ip_google_access = true
  stack_type               = "IPV4_ONLY"
  #checkov:skip=CKV_GCP_26:VPC flow logs are billed per GB; the subnet has no internet path and carries only the cluster's own traffic. Enable them in your organisation policy if required.
}

# Ray binds OS-chosen ports (and the client server a derived port in 20000-29999):
# every unprivileged TCP port, from VMs carrying this cluster's tag to VMs carrying it.
resource "google_compute_firewall" "ray" {
  project     = var.project
  name        = "${local.name}-ray"
  network     = google_compute_network.this.id
  description = "Syndeo ${local.cluster_id}: Ray between the cluster's own nodes only"
  direction   = "INGRESS"
  priority    = 1000
  allow {
    protocol = "tcp"
    ports    = ["1024-65535"]
  }
  source_tags = [local.network_tag]
  target_tags = [local.network_tag]
}

resource "google_compute_firewall" "admin_ssh" {
  count         = length(var.admin_cidrs) > 0 ? 1 : 0
  project       = var.project
  name          = "${local.name}-admin-ssh"
  network       = google_compute_network.this.id
  description   = "Syndeo ${local.cluster_id}: SSH from admin_cidrs (e.g. IAP's 35.235.240.0/20)"
  direction     = "INGRESS"
  priority      = 1000
  source_ranges = var.admin_cidrs
  target_tags   = [local.network_tag]
  allow {
    protocol = "tcp"
    ports    = ["22"]
  }
}

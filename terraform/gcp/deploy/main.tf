# Every input of ../ passed on unchanged (tests/iac/test_roots.py keeps the lists equal).
module "cluster" {
  source = "../"

  cluster_name             = var.cluster_name
  node_count               = var.node_count
  instance_type            = var.instance_type
  image                    = var.image
  region                   = var.region
  zone                     = var.zone
  spot                     = var.spot
  disk_size_gb             = var.disk_size_gb
  network_cidr             = var.network_cidr
  create_bucket            = var.create_bucket
  bucket_name              = var.bucket_name
  bucket_versioning        = var.bucket_versioning
  rendezvous_prefix        = var.rendezvous_prefix
  record_expiry_days       = var.record_expiry_days
  labels                   = var.labels
  admin_cidrs              = var.admin_cidrs
  cpus_per_node            = var.cpus_per_node
  gpus_per_node            = var.gpus_per_node
  memory_mb_per_node       = var.memory_mb_per_node
  object_store_mb_per_node = var.object_store_mb_per_node
  join_timeout_s           = var.join_timeout_s
  run                      = var.run
  not_before               = var.not_before
  image_path               = var.image_path
  image_digest             = var.image_digest
  extra_env                = var.extra_env
  groups                   = var.groups
  dashboard                = var.dashboard
  grown                    = var.grown
  project                  = var.project
  node_service_account     = var.node_service_account
  disk_type                = var.disk_type
  launch_key               = var.launch_key
}

# packer build -only=googlecompute.syndeo -var-file=examples/gcp.pkrvars.hcl packer/cloud
sif_path         = "../../.syndeo/image/syndeo-debootstrap.sif"
image_name       = "syndeo"
gcp_project_id   = "my-project"
gcp_zone         = "europe-west4-a"
gcp_machine_type = "e2-standard-2"

# From the repository root:
#   packer init packer/cloud
#   packer build -only=googlecompute.syndeo -var-file=packer/cloud/examples/gcp.pkrvars.hcl packer/cloud
# The SIF is .syndeo/image/syndeo-debootstrap.sif (`invoke build`); sif_path = "…" names another.
# Images are global on Compute Engine: the zone is only where the build VM runs.
image_name       = "syndeo"
gcp_project_id   = "my-project"
gcp_zone         = "us-central1-a"
gcp_machine_type = "e2-standard-2"

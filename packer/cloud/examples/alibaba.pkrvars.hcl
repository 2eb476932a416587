# From the repository root:
#   packer init packer/cloud
#   packer build -only=alicloud-ecs.syndeo -var-file=packer/cloud/examples/alibaba.pkrvars.hcl packer/cloud
# The SIF is .syndeo/image/syndeo-debootstrap.sif (`invoke build`); sif_path = "…" names another.
# Credentials: ALIBABA_CLOUD_ACCESS_KEY_ID / ALIBABA_CLOUD_ACCESS_KEY_SECRET in the environment.
# Custom images are regional: build in the region the clusters run in (or copy the image).
image_name            = "syndeo"
alibaba_region        = "cn-hangzhou"
alibaba_instance_type = "ecs.g7.large"
# A Debian 12 public image of that region (ids carry a date: look up the current one).
alibaba_source_image = "debian_12_x64_20G_alibase_20260101.vhd"

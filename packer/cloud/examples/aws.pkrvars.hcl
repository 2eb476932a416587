# From the repository root:
#   packer init packer/cloud
#   packer build -only=amazon-ebs.syndeo -var-file=packer/cloud/examples/aws.pkrvars.hcl packer/cloud
# The SIF is .syndeo/image/syndeo-debootstrap.sif (`invoke build`); sif_path = "…" names another.
# us-east-1, as every quick start deploys there: an AMI is regional (packer/README.md).
image_name        = "syndeo"
aws_region        = "us-east-1"
aws_instance_type = "t3.medium"

# packer build -only=amazon-ebs.syndeo -var-file=examples/aws.pkrvars.hcl packer/cloud
sif_path          = "../../.syndeo/image/syndeo-debootstrap.sif"
image_name        = "syndeo"
aws_region        = "eu-central-1"
aws_instance_type = "t3.medium"

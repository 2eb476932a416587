# PKR_VAR_azure_client_secret=... packer build -only=azure-arm.syndeo \
#   -var-file=examples/azure.pkrvars.hcl packer/cloud
sif_path              = "../../.syndeo/image/syndeo-debootstrap.sif"
image_name            = "syndeo"
azure_subscription_id = "00000000-0000-0000-0000-000000000000"
azure_resource_group  = "syndeo-images"
azure_location        = "westeurope"
azure_client_id       = "11111111-1111-1111-1111-111111111111"

# From the repository root, signed in with `az login` (or a service principal:
# azure_client_id here and PKR_VAR_azure_client_secret in the environment):
#   packer init packer/cloud
#   packer build -only=azure-arm.syndeo -var-file=packer/cloud/examples/azure.pkrvars.hcl packer/cloud
# The SIF is .syndeo/image/syndeo-debootstrap.sif (`invoke build`); sif_path = "…" names another.
image_name            = "syndeo"
azure_subscription_id = "00000000-0000-0000-0000-000000000000"
azure_resource_group  = "syndeo-images"
azure_location        = "westeurope"

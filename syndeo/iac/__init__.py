"""Infrastructure as code: the Terraform adapter VM targets are built on."""

terraform {
  # 1.9: validation blocks may refer to other variables (node_ips vs node_count).
  required_version = ">= 1.9"
  # No providers: this module only renders text (node environment, cloud-init,
  # start/stop commands), so it plans, tests and validates offline.
}

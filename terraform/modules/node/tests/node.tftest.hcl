# Offline tests of the node module (no provider): `terraform test`, run from pytest
# by tests/iac/test_node_module.py.

variables {
  node = {
    cluster_id = "demo-1"
    node_count = 3
    rendezvous = "s3://bucket/prefix"
    target     = "aws"
    run        = "python -m syndeo.bench run --env CartPole-v1"
    image_path = "/opt/syndeo/syndeo.sif"
  }
}

run "renders_every_rank" {
  command = plan

  assert {
    condition     = length(output.env) == 3 && length(output.user_data) == 3 && length(output.start_commands) == 3
    error_message = "one rendering per rank"
  }
  assert {
    condition     = [for e in output.env : e.SYNDEO_RANK] == ["0", "1", "2"]
    error_message = "index = rank"
  }
  assert {
    condition     = output.env[0].SYNDEO_RUN == var.node.run && output.env[1].SYNDEO_RUN == "" && output.env[2].SYNDEO_RUN == ""
    error_message = "only the head runs the workload"
  }
  assert {
    condition     = alltrue([for e in output.env : e.SYNDEO_IMAGE == var.node.image_path && !contains(keys(e), "SYNDEO_PYTHON")])
    error_message = "the image named"
  }
  assert {
    condition     = length(distinct(output.scratch_dirs)) == 3 && alltrue([for d in output.scratch_dirs : length(d) <= 40])
    error_message = "scratch dirs distinct per rank and short enough for Ray's sockets"
  }
  assert {
    condition     = alltrue([for i, e in output.env : e.SYNDEO_SCRATCH_BASE == "/var/tmp" && startswith(output.scratch_dirs[i], "/var/tmp/sy-")])
    error_message = "the node checks every level of its scratch dir below /var/tmp, the predictable sy-<hash> included"
  }
}

run "cloud_init_writes_env_0600_and_starts_the_unit" {
  command = plan

  assert {
    condition     = alltrue([for u in output.user_data : startswith(u, "#cloud-config\n")])
    error_message = "user-data must start with #cloud-config"
  }
  assert {
    condition     = yamldecode(output.user_data[1]).write_files[0].path == "/etc/syndeo/node.env" && yamldecode(output.user_data[1]).write_files[0].permissions == "0600"
    error_message = "env file path and mode"
  }
  assert {
    condition     = yamldecode(output.user_data[1]).write_files[0].content == output.env_files[1]
    error_message = "user-data carries exactly the rendered env file"
  }
  assert {
    condition     = yamldecode(output.user_data[0]).runcmd == [["systemctl", "start", "--no-block", "syndeo-node"]]
    error_message = "starts the baked unit"
  }
}

run "bare_nodes_and_forwarded_env" {
  command = plan

  variables {
    node = merge(var.node, {
      image_path = null
      python     = "/opt/venv/bin/python"
      extra_env  = { AWS_ENDPOINT_URL = "http://10.98.0.1:9000", AWS_REGION = "us-east-1" }
      node_ips   = ["10.98.0.11", "10.98.0.12", "10.98.0.13"]
    })
  }

  assert {
    condition     = output.env[2].SYNDEO_PYTHON == "/opt/venv/bin/python" && !contains(keys(output.env[2]), "SYNDEO_IMAGE")
    error_message = "bare nodes name their interpreter"
  }
  assert {
    condition     = output.env[0].SYNDEO_FORWARD_ENV == "AWS_ENDPOINT_URL AWS_REGION" && output.env[0].AWS_REGION == "us-east-1"
    error_message = "extra variables are set and listed for the container"
  }
  assert {
    condition     = output.env[1].SYNDEO_NODE_IP == "10.98.0.12"
    error_message = "per-rank node IP"
  }
}

run "escapes_shell_and_systemd_specials" {
  command = plan

  variables {
    node = merge(var.node, {
      run = "echo \"a b\" '$HOME' `x` c=d \\"
    })
  }

  assert {
    condition     = strcontains(output.env_files[0], "SYNDEO_RUN=\"echo \\\"a b\\\" '\\$HOME' \\`x\\` c=d \\\\\"\n")
    error_message = "quotes, $, backquote and backslash are escaped"
  }
}

run "refuses_bad_cluster_id" {
  command = plan
  variables {
    node = merge(var.node, {
      cluster_id = "Bad_ID"
    })
  }
  expect_failures = [var.node]
}

run "refuses_zero_nodes" {
  command = plan
  variables {
    node = merge(var.node, {
      node_count = 0
    })
  }
  expect_failures = [var.node]
}

run "refuses_unknown_rendezvous_scheme" {
  command = plan
  variables {
    node = merge(var.node, {
      rendezvous = "http://example/x"
    })
  }
  expect_failures = [var.node]
}

run "refuses_newline_in_run" {
  command = plan
  variables {
    node = merge(var.node, {
      run = "echo a\nrm -rf /"
    })
  }
  expect_failures = [var.node]
}

run "refuses_reserved_extra_env" {
  command = plan
  variables {
    node = merge(var.node, {
      extra_env = { SYNDEO_RANK = "7" }
    })
  }
  expect_failures = [var.node]
}

run "refuses_node_ips_of_wrong_length" {
  command = plan
  variables {
    node = merge(var.node, {
      node_ips = ["10.0.0.1"]
    })
  }
  expect_failures = [var.node]
}

run "launch_key_lands_in_every_env_file" {
  command = plan
  variables {
    launch_key = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
  }

  assert {
    condition     = alltrue([for e in output.env : e.SYNDEO_LAUNCH_KEY == var.launch_key])
    error_message = "every node gets the launch key"
  }
  assert {
    condition     = alltrue([for f in output.env_files : strcontains(f, "SYNDEO_LAUNCH_KEY=\"${var.launch_key}\"\n")])
    error_message = "the key is in every env file (user-data writes it 0600)"
  }
  assert {
    condition     = length(output.scratch_dirs) == 3
    error_message = "outputs without the key stay readable"
  }
}

run "no_launch_key_no_variable" {
  command = plan

  assert {
    condition     = alltrue([for e in output.env : !contains(keys(e), "SYNDEO_LAUNCH_KEY")])
    error_message = "no key given: none set"
  }
}

run "refuses_a_malformed_launch_key" {
  command = plan
  variables {
    launch_key = "not-hex"
  }
  expect_failures = [var.launch_key]
}

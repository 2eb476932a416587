"""Google Cloud: ``terraform/gcp`` (private VPC, GCS bucket, prefix-scoped service account)."""

from __future__ import annotations

import os
from typing import Any

from syndeo.core.errors import ConfigError
from syndeo.launcher.spec import ClusterSpec
from syndeo.launcher.targets.cloud import CloudTarget


class GcpTarget(CloudTarget):
    name = "gcp"
    module = "gcp"
    scheme = "gs"
    own = ("project",)

    def cloud_vars(self, spec: ClusterSpec) -> dict[str, Any]:
        project = self.settings.project or os.environ.get("GOOGLE_CLOUD_PROJECT")
        if not project:
            raise ConfigError("gcp: name the project ([gcp] project, or GOOGLE_CLOUD_PROJECT)")
        return {"project": project}

    def check_credentials(self) -> None:
        # Application Default Credentials: what Terraform's google provider uses too.
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError

        try:
            google.auth.default()
        except DefaultCredentialsError:
            raise ConfigError(
                "gcp: no Google credentials found (gcloud auth application-default login, "
                "or GOOGLE_APPLICATION_CREDENTIALS)"
            ) from None

"""Google Cloud: ``terraform/gcp`` (private VPC, GCS bucket, prefix-scoped service account)."""

from __future__ import annotations

import json
import os
from typing import Any

from syndeo.core.errors import ConfigError
from syndeo.launcher.spec import ClusterSpec
from syndeo.launcher.targets.cloud import CloudTarget

# What terraform/gcp creates through: a fresh project has both disabled, and the apply
# would fail on its first resource.
REQUIRED_APIS = ("compute.googleapis.com", "iam.googleapis.com")
# Service Usage API (v1, services.get: a Service with "state": "ENABLED" | "DISABLED");
# SYNDEO_GCP_SERVICEUSAGE_URL points the check at a local fake in tests.
SERVICEUSAGE_URL = "https://serviceusage.googleapis.com/v1"


class GcpTarget(CloudTarget):
    name = "gcp"
    module = "gcp"
    scheme = "gs"
    own = ("project", "node_service_account")

    def cloud_vars(self, spec: ClusterSpec) -> dict[str, Any]:
        project = self.settings.project or os.environ.get("GOOGLE_CLOUD_PROJECT")
        if not project:
            raise ConfigError("gcp: name the project ([gcp] project, or GOOGLE_CLOUD_PROJECT)")
        return {"project": project}

    def check_credentials(self) -> str:
        # Application Default Credentials: what Terraform's google provider uses too.
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError

        try:
            credentials, found_project = google.auth.default(
                scopes=["https://www.googleapis.com/auth/cloud-platform"]
            )
        except DefaultCredentialsError:
            raise ConfigError(
                "gcp: no Google credentials found (gcloud auth application-default login, "
                "or GOOGLE_APPLICATION_CREDENTIALS)"
            ) from None
        project = self.settings.project or os.environ.get("GOOGLE_CLOUD_PROJECT") or found_project
        if not project:
            raise ConfigError("gcp: name the project ([gcp] project, or GOOGLE_CLOUD_PROJECT)")
        self._check_apis(credentials, project)
        who = getattr(credentials, "service_account_email", None) or type(credentials).__name__
        return f"credentials {who}; project {project}: {', '.join(REQUIRED_APIS)} enabled"

    def _check_apis(self, credentials: Any, project: str) -> None:
        """The APIs the module needs are enabled (Service Usage ``services.get``)."""
        from google.auth.exceptions import GoogleAuthError
        from google.auth.transport.requests import AuthorizedSession
        from requests import RequestException

        base = os.environ.get("SYNDEO_GCP_SERVICEUSAGE_URL", SERVICEUSAGE_URL).rstrip("/")
        session = AuthorizedSession(credentials)  # type: ignore[no-untyped-call]
        disabled = []
        for api in REQUIRED_APIS:
            try:
                reply = session.get(f"{base}/projects/{project}/services/{api}", timeout=30)
            except (GoogleAuthError, RequestException) as exc:
                raise ConfigError(
                    f"gcp: cannot ask which APIs {project} has enabled: {exc}"
                ) from None
            if reply.status_code != 200:
                raise ConfigError(
                    f"gcp: cannot ask which APIs {project} has enabled (HTTP {reply.status_code}; "
                    "the caller needs serviceusage.services.get)"
                )
            try:
                state = json.loads(reply.text).get("state")
            except ValueError:
                state = None
            if state != "ENABLED":
                disabled.append(api)
        if disabled:
            raise ConfigError(
                f"gcp: {', '.join(disabled)} not enabled in project {project}: "
                f"gcloud services enable {' '.join(disabled)} --project {project}"
            )

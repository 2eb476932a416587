"""Google Cloud: ``terraform/gcp`` (private VPC, GCS bucket, prefix-scoped service account)."""

from __future__ import annotations

import json
import os
import re
from typing import Any
from urllib.parse import urlencode

from syndeo.core.errors import ConfigError
from syndeo.launcher.spec import ClusterSpec, Launched
from syndeo.launcher.targets.cloud import CloudTarget, Machine

# What terraform/gcp creates through: a fresh project has both disabled, and the apply
# would fail on its first resource.
REQUIRED_APIS = ("compute.googleapis.com", "iam.googleapis.com")
# Service Usage API (v1, services.get: a Service with "state": "ENABLED" | "DISABLED");
# SYNDEO_GCP_SERVICEUSAGE_URL points the check at a local fake in tests.
SERVICEUSAGE_URL = "https://serviceusage.googleapis.com/v1"
# Compute Engine API v1: images.get (.../global/images/NAME) and images.getFromFamily
# (.../global/images/family/FAMILY) are both the image variable's own path; the reply
# is an Image whose description packer/cloud sets to "syndeo SIF sha256:<digest>".
# SYNDEO_GCP_COMPUTE_URL points the check at a local fake in tests.
COMPUTE_URL = "https://compute.googleapis.com/compute/v1"
_DIGEST = re.compile(r"sha256:([0-9a-f]{64})")
# A VM in one of these Instance.status values has ended (Compute v1 instances:
# PROVISIONING, STAGING, RUNNING, STOPPING, STOPPED, SUSPENDING, SUSPENDED, REPAIRING,
# TERMINATED; a stopped VM is TERMINATED).
_ENDED = ("STOPPING", "STOPPED", "SUSPENDING", "SUSPENDED", "TERMINATED")


class GcpTarget(CloudTarget):
    name = "gcp"
    module = "gcp"
    node_resource = "google_compute_instance.node"
    scheme = "gs"
    own = ("project", "node_service_account")

    def cloud_vars(self, spec: ClusterSpec) -> dict[str, Any]:
        project = self.settings.project or os.environ.get("GOOGLE_CLOUD_PROJECT")
        if not project:
            raise ConfigError("gcp: name the project ([gcp] project, or GOOGLE_CLOUD_PROJECT)")
        return {"project": project}

    def machine_summary(self, spec: ClusterSpec) -> dict[str, Any]:
        # The project, for the watcher's instance list (list_machines) from a new shell.
        return {**super().machine_summary(spec), "project": self.cloud_vars(spec)["project"]}

    def list_machines(self, launched: Launched) -> list[Machine] | None:
        """Compute v1 ``instances.aggregatedList`` (every zone) filtered by the cluster's
        label: a page of ``{"items": {"zones/Z": {"instances": [Instance, ...]}}}``, each
        Instance with ``status``, ``statusMessage`` and ``labels``
        (https://cloud.google.com/compute/docs/reference/rest/v1/instances/aggregatedList).
        Checked against that reference and a local fake only (no Google account here)."""
        import google.auth
        from google.auth.exceptions import GoogleAuthError

        from syndeo.launcher.targets import gcpcheck

        project, cid = launched.tf.machines.get("project"), launched.cluster_id
        if not project:
            return None  # a cluster started before its project was recorded
        try:
            credentials, _ = google.auth.default(
                scopes=["https://www.googleapis.com/auth/cloud-platform"]
            )
        except GoogleAuthError:
            return None
        api = gcpcheck.Api(credentials)
        base = os.environ.get("SYNDEO_GCP_COMPUTE_URL", COMPUTE_URL).rstrip("/")
        query = {"filter": f'labels.syndeo-cluster = "{cid}"', "returnPartialSuccess": "true"}
        found: list[Machine] = []
        while True:
            url = f"{base}/projects/{project}/aggregated/instances?{urlencode(query)}"
            page = api.call(url).body
            if page is None:
                return None
            for scope in (page.get("items") or {}).values():
                found += [m for i in scope.get("instances", []) if (m := _machine(i, cid))]
            if not page.get("nextPageToken"):
                return found
            query["pageToken"] = str(page["nextPageToken"])

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
        self._read_digest(credentials)
        who = getattr(credentials, "service_account_email", None) or type(credentials).__name__
        digest = f"SIF sha256 {self.baked_digest[:12]}" if self.baked_digest else "no SIF digest"
        return (
            f"credentials {who}; project {project}: {', '.join(REQUIRED_APIS)} enabled; "
            f"image {self.settings.image} ({digest}); {self._preflight(credentials, project)}"
        )

    def _preflight(self, credentials: Any, project: str) -> str:
        """The machine types offered in the cluster's zone, the region's quota headroom
        and the deployer's permissions (gcpcheck.py), before anything is created."""
        from syndeo.launcher.targets import gcpcheck
        from syndeo.launcher.targets.cloudcheck import type_counts

        s = self.settings
        api = gcpcheck.Api(credentials)
        compute = os.environ.get("SYNDEO_GCP_COMPUTE_URL", COMPUTE_URL).rstrip("/")
        region = api.call(f"{compute}/projects/{project}/regions/{s.region}")
        counts = type_counts(self)
        zones = gcpcheck.zones_to_try(region, s.zone)
        found, offered = gcpcheck.machine_types(api, compute, project, zones, sorted(counts))
        quota = gcpcheck.quota_headroom(region, found, counts, s.spot, (project, str(s.region)))
        base = os.environ.get("SYNDEO_GCP_RESOURCEMANAGER_URL", gcpcheck.RESOURCEMANAGER_URL)
        rights = gcpcheck.missing_permissions(api, base.rstrip("/"), project)
        return f"{offered}; {quota}; {rights}"

    def _read_digest(self, credentials: Any) -> None:
        """The image exists, and the SIF digest packer/cloud wrote into its description
        (recorded in deploy.json and passed to the nodes, as on AWS)."""
        from google.auth.exceptions import GoogleAuthError
        from google.auth.transport.requests import AuthorizedSession
        from requests import RequestException

        image = str(self.settings.image)
        path = image[image.index("projects/") :] if "projects/" in image else image
        base = os.environ.get("SYNDEO_GCP_COMPUTE_URL", COMPUTE_URL).rstrip("/")
        session = AuthorizedSession(credentials)  # type: ignore[no-untyped-call]
        try:
            reply = session.get(f"{base}/{path}", timeout=30)
        except (GoogleAuthError, RequestException) as exc:
            raise ConfigError(f"gcp: cannot look up image {image}: {exc}") from None
        if reply.status_code == 404:
            raise ConfigError(
                f"gcp: image {image} does not exist (or is not shared with you): build it "
                "with packer/cloud (packer/README.md) or name another"
            )
        if reply.status_code != 200:
            raise ConfigError(
                f"gcp: cannot look up image {image} (HTTP {reply.status_code}; the caller "
                "needs compute.images.get)"
            )
        try:
            description = str(json.loads(reply.text).get("description") or "")
        except ValueError:
            description = ""
        found = _DIGEST.search(description)
        self.baked_digest = found.group(1) if found else None

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


def _machine(instance: dict[str, Any], cluster_id: str) -> Machine | None:
    """An Instance of the cluster by its labels (None: not one of its nodes)."""
    status, ended = str(instance.get("status", "")), None
    if status in _ENDED:
        ended = f"Compute Engine lists its VM {instance.get('name')} as {status}"
        why = instance.get("statusMessage")
        ended = f"{ended} ({why})" if why else ended
    return Machine.tagged(instance.get("labels") or {}, cluster_id, ended)

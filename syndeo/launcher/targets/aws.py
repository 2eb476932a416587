"""AWS: ``terraform/aws`` (private VPC, S3 rendezvous bucket, prefix-scoped role)."""

from __future__ import annotations

import os
import re
from typing import Any

from syndeo.core.errors import ConfigError, TargetError
from syndeo.launcher.spec import ClusterSpec, Launched
from syndeo.launcher.targets.base import StartRefused
from syndeo.launcher.targets.cloud import CloudTarget, Machine
from syndeo.launcher.targets.tfexec import Terraform, TerraformError

# The tag packer/cloud gives an AMI: the sha256 of the SIF baked into it.
DIGEST_TAG = "syndeo-image-digest"
# What terraform/aws names after the cluster (``syndeo-<id>…``) and tags with
# ``syndeo-cluster = <id>`` (provider default_tags), by the API that lists it.
_TAGGED_EC2 = (
    ("describe_instances", "Reservations", "InstanceId", "instance"),
    ("describe_network_interfaces", "NetworkInterfaces", "NetworkInterfaceId", "network interface"),
    ("describe_security_groups", "SecurityGroups", "GroupId", "security group"),
    ("describe_vpcs", "Vpcs", "VpcId", "VPC"),
    ("describe_subnets", "Subnets", "SubnetId", "subnet"),
    ("describe_route_tables", "RouteTables", "RouteTableId", "route table"),
    ("describe_vpc_endpoints", "VpcEndpoints", "VpcEndpointId", "VPC endpoint"),
)
# EC2's answers to RunInstances that another zone may not give: no capacity for the type
# there now, or the type not supported there (its error reference).
_CAPACITY = ("InsufficientInstanceCapacity", "Unsupported")
# Its answers when the account is at a limit (vCPUs of a class, instances, spot
# requests): lifted by a quota increase or by the account's other instances ending.
_LIMITS = ("VcpuLimitExceeded", "InstanceLimitExceeded", "MaxSpotInstanceCountExceeded")
# The provider's retries in a grow's apply (see AwsTarget.grow_overrides).
GROW_MAX_RETRIES = 2
# vCPU quotas of EC2 by instance class (Service Quotas, service code "ec2"), on demand and
# spot: the codes AWS's Service Quotas console and its EC2 documentation name.  A class
# not listed (HPC, Mac, DL/Trn spot) is not checked.
_QUOTAS: dict[str, tuple[str, str | None, str]] = {
    # class: (on-demand code, spot code, what the quota is called)
    "standard": ("L-1216C47A", "L-34B43A08", "Standard (A, C, D, H, I, M, R, T, Z) instances"),
    "g": ("L-DB2E81BA", "L-3819A6DF", "G and VT instances"),
    "p": ("L-417A185B", "L-7212CCBC", "P instances"),
    "x": ("L-7295265B", "L-E3A00192", "X instances"),
    "f": ("L-74FC7D96", "L-88CF9481", "F instances"),
    "inf": ("L-1945791B", "L-B5D1601B", "Inf instances"),
    "dl": ("L-6E869C2A", None, "DL instances"),
    "trn": ("L-2C3B7624", None, "Trn instances"),
    "u": ("L-43DA4232", None, "High Memory instances"),
}
# States in which a listed thing is on its way out (it costs nothing and goes by itself).
_GONE = ("terminated", "shutting-down", "deleted", "deleting")


class AwsTarget(CloudTarget):
    name = "aws"
    module = "aws"
    node_resource = "aws_instance.node"
    scheme = "s3"
    own = ("permissions_boundary", "api_max_retries")
    # The zone of this launch's attempt when the launcher chose it (a retry in the next
    # zone); None: the user's [aws] zone, or the module's first zone offering the types.
    _zone: str | None = None

    def cloud_vars(self, spec: ClusterSpec) -> dict[str, Any]:
        return {"zone": self._zone} if self._zone is not None else {}

    def grow_overrides(self, tfvars: dict[str, Any]) -> dict[str, Any]:
        # The provider would retry a capacity refusal for minutes (25 times at its
        # default), holding the watcher in one apply and calling RunInstances ~10 times
        # a minute (benchmarks/cloud_fault.py); refused at once, the group's own
        # backoff decides when to ask again.
        own = tfvars.get("api_max_retries")
        return {"api_max_retries": min(GROW_MAX_RETRIES, 25 if own is None else int(own))}

    def grow(
        self, launched: Launched, group: str, nodes: int, hosts: list[str] | None = None
    ) -> str:
        """As every cloud; EC2's no capacity, or a limit of the account, is a refusal
        that lifts in time (the watcher waits long before it asks again)."""
        try:
            return super().grow(launched, group, nodes, hosts)
        except TerraformError as exc:
            code = _capacity(exc) or _limit(exc)
            if not code:
                raise
            raise StartRefused(f"aws: {code} for group {group}: {exc}", kind="quota") from exc

    def launch(self, spec: ClusterSpec, *, detach: bool = False) -> Launched:
        """As every Terraform target; a zone out of capacity (or not supporting the type)
        is followed by the next zone that offers every type, as EC2's own advice says,
        unless the user pinned the zone.  Each failed attempt is destroyed first."""
        try:
            return self._launch_attempt(spec, detach)
        except TerraformError as exc:
            if self.settings.zone is not None or not _capacity(exc):
                raise
            error = exc
        zones = self._zones()
        tried = zones[:1]  # the module's choice: the first zone by name offering them all
        for zone in zones[1:]:
            if self.echo is not None:
                self.echo(f"aws: {tried[-1]}: {_capacity(error)}; trying {zone}")
            self._zone = zone
            try:
                return self._launch_attempt(spec, detach)
            except TerraformError as exc:
                if not _capacity(exc):
                    raise
                error, tried = exc, [*tried, zone]
        raise TargetError(
            f"aws: no zone of {self.settings.region} could start the cluster's instances "
            f"(tried {', '.join(tried)}: {_capacity(error)}): try again later, or another "
            "instance type, region, or fewer nodes"
        )

    def _launch_attempt(self, spec: ClusterSpec, detach: bool) -> Launched:
        """One apply, and once more if IAM made a node role or instance profile whose
        answer was lost (the provider's retry then met "EntityAlreadyExists"): the failed
        attempt is destroyed, that entity with it (:meth:`before_destroy`), and the next
        apply names its own anew."""
        try:
            return super().launch(spec, detach=detach)
        except TerraformError as exc:
            lost = _lost_answer(exc)
            if not lost:
                raise
        self._say(f"aws: IAM made {lost} but its answer was lost; applying again")
        return super().launch(spec, detach=detach)

    def _zones(self) -> list[str]:
        """Zones of the region offering every instance type of the cluster, by name (the
        order terraform/aws picks from)."""
        from botocore.exceptions import BotoCoreError, ClientError

        types = sorted(set(self._instance_types()))
        try:
            offers = self._client("ec2").describe_instance_type_offerings(
                LocationType="availability-zone",
                Filters=[{"Name": "instance-type", "Values": types}],
            )["InstanceTypeOfferings"]
        except (BotoCoreError, ClientError) as exc:
            raise TargetError(f"aws: cannot look up zones for {types}: {_why(exc)}") from None
        where: dict[str, set[str]] = {}
        for o in offers:
            where.setdefault(o["Location"], set()).add(o["InstanceType"])
        return sorted(z for z, offered in where.items() if offered >= set(types))

    def machine_summary(self, spec: ClusterSpec) -> dict[str, Any]:
        summary = super().machine_summary(spec)
        # Not AWS itself (an emulator, a private endpoint): the machines were not of
        # this type, so `invoke compare` must not take the run as a measurement of it.
        endpoint = os.environ.get("AWS_ENDPOINT_URL_EC2") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint:
            summary["api_endpoint"] = endpoint
        return summary

    def _client(self, service: str, region: str | None = None, **kwargs: Any) -> Any:
        import boto3

        return boto3.client(service, region_name=region or self.settings.region, **kwargs)

    def check_credentials(self) -> str:
        """Before anything is created: who we are, and that the image and the instance
        type exist in the region (a bad one would fail the apply half-way)."""
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError

        if boto3.session.Session().get_credentials() is None:
            raise ConfigError(
                "aws: no AWS credentials found (aws configure / aws sso login, or "
                "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)"
            )
        s = self.settings
        try:
            who = str(self._client("sts").get_caller_identity().get("Arn", "?"))
        except (BotoCoreError, ClientError) as exc:
            raise ConfigError(f"aws: the credentials found are not accepted: {_why(exc)}") from None
        ec2 = self._client("ec2")
        try:
            images = ec2.describe_images(ImageIds=[s.image])["Images"]
        except ClientError as exc:
            images = []
            if _code(exc) not in ("InvalidAMIID.NotFound", "InvalidAMIID.Malformed"):
                raise ConfigError(f"aws: cannot look up image {s.image}: {_why(exc)}") from None
        except BotoCoreError as exc:
            raise ConfigError(f"aws: cannot look up image {s.image}: {_why(exc)}") from None
        if images:
            tags = {t["Key"]: t["Value"] for t in images[0].get("Tags", [])}
            self.baked_digest = tags.get(DIGEST_TAG)
        else:
            raise ConfigError(
                f"aws: image {s.image} does not exist in {s.region} (an AMI is regional: "
                f"copy it there with `aws ec2 copy-image --source-region <its region> "
                f"--source-image-id {s.image} --region {s.region} --name syndeo-node`)"
            )
        offered = self._offered_types(ec2)
        digest = (
            f"SIF sha256 {self.baked_digest[:12]}" if self.baked_digest else "no SIF digest tag"
        )
        return (
            f"identity {who}; image {s.image} in {s.region} ({digest}); "
            f"{', '.join(offered)} offered in {s.zone or s.region}; {self._quota_headroom(ec2)}; "
            f"{self._permissions(who)}"
        )

    def _offered_types(self, ec2: Any) -> list[str]:
        """The cluster's instance types, each offered in its zone or region (else one line)."""
        from botocore.exceptions import BotoCoreError, ClientError

        s = self.settings
        offered: list[str] = []
        for itype in sorted(set(self._instance_types())):
            where = {"LocationType": "availability-zone" if s.zone else "region"}
            values = [s.zone or s.region]
            try:
                found = ec2.describe_instance_type_offerings(
                    **where,
                    Filters=[
                        {"Name": "instance-type", "Values": [itype]},
                        {"Name": "location", "Values": values},
                    ],
                )["InstanceTypeOfferings"]
            except (BotoCoreError, ClientError) as exc:
                raise ConfigError(f"aws: cannot look up instance types: {_why(exc)}") from None
            if not found:
                raise ConfigError(
                    f"aws: instance type {itype} is not offered in {values[0]}: pick another "
                    "type or region (`aws ec2 describe-instance-type-offerings`)"
                )
            offered.append(itype)
        return offered

    def _permissions(self, who: str) -> str:
        """The deployer policy's actions, simulated by IAM for the caller (awscheck.py)."""
        from botocore.config import Config

        from syndeo.launcher.targets.awscheck import denied_actions

        # One retry at most: an IAM without the call (an emulator) must not hold up check.
        iam = self._client("iam", config=Config(retries={"max_attempts": 2, "mode": "standard"}))
        s = self.settings
        return denied_actions(iam, who, str(s.region), s.permissions_boundary)

    def _quota_headroom(self, ec2: Any) -> str:
        """The cluster's vCPUs against the region's vCPU quota of each instance class, less
        what already runs there; one line if it cannot fit (a new account's standard quota
        is 5 vCPUs: the apply would create the network and fail at the second instance)."""
        from botocore.exceptions import BotoCoreError, ClientError

        s = self.settings
        wanted = self._type_counts()
        try:
            running = [
                i
                for page in ec2.get_paginator("describe_instances").paginate(
                    Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
                )
                for r in page["Reservations"]
                for i in r["Instances"]
            ]
            types = sorted(set(wanted) | {i["InstanceType"] for i in running})
            vcpus = {
                t["InstanceType"]: int(t["VCpuInfo"]["DefaultVCpus"])
                for t in ec2.describe_instance_types(InstanceTypes=types)["InstanceTypes"]
            }
        except (BotoCoreError, ClientError) as exc:
            return f"vCPU quota not checked ({_why(exc)})"
        need: dict[str, int] = {}
        for itype, count in wanted.items():
            code = _quota_code(itype, s.spot)
            if code is not None:
                need[code] = need.get(code, 0) + count * vcpus.get(itype, 0)
        used: dict[str, int] = {}
        for inst in running:
            code = _quota_code(inst["InstanceType"], inst.get("InstanceLifecycle") == "spot")
            if code in need:
                used[code] = used.get(code, 0) + vcpus.get(inst["InstanceType"], 0)
        said: list[str] = []
        quotas = self._client("service-quotas")
        for code, vcpu in sorted(need.items()):
            name = next(
                f"{'Spot' if spot == code else 'On-Demand'} {what}"
                for od, spot, what in _QUOTAS.values()
                if code in (od, spot)
            )
            try:
                quota = float(
                    quotas.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"]
                )
            except (BotoCoreError, ClientError) as exc:
                said.append(f"{name} vCPU quota not read ({_why(exc)})")
                continue
            in_use = used.get(code, 0)
            if vcpu + in_use > quota:
                raise ConfigError(
                    f"aws: the cluster needs {vcpu} vCPUs of {name} in {s.region}, but the quota "
                    f"is {quota:.0f} with {in_use} in use: ask for more (`aws service-quotas "
                    f"request-service-quota-increase --service-code ec2 --quota-code {code} "
                    f"--desired-value {vcpu + in_use} --region {s.region}`) or use fewer or "
                    "smaller nodes"
                )
            said.append(f"{vcpu} of {quota - in_use:.0f} free vCPUs of {name} ({code})")
        return "; ".join(said) or "no vCPU quota applies"

    def _type_counts(self) -> dict[str, int]:
        """Instances of each type the cluster starts with."""
        from syndeo.launcher.targets.cloudcheck import type_counts

        return type_counts(self)

    def _instance_types(self) -> list[str]:
        types = self._group_types(self.cfg.layout)
        return [t or self.settings.instance_type or "" for t in types.values()] or [
            self.settings.instance_type or ""
        ]

    def before_destroy(self, launched: Launched, tf: Terraform) -> None:
        self._terminate_unrecorded(launched, tf)
        self._remove_unrecorded_identity(launched, tf)

    def _terminate_unrecorded(self, launched: Launched, tf: Terraform) -> None:
        """Instances of the cluster (by its tag, set as they are created) that Terraform's
        state lacks: an apply killed while it waited for them to run (nodes can be up
        before the provider records them).  Terminated first: destroy would leave them,
        and on EC2 their network interfaces would block the subnet's deletion."""
        from botocore.exceptions import BotoCoreError, ClientError, WaiterError

        region = launched.tf.machines.get("region")
        known = set(tf.ids("aws_instance"))
        try:
            ec2 = self._client("ec2", region)
            found = ec2.describe_instances(
                Filters=[
                    {"Name": "tag:syndeo-cluster", "Values": [launched.cluster_id]},
                    {
                        "Name": "instance-state-name",
                        "Values": ["pending", "running", "stopping", "stopped"],
                    },
                ]
            )["Reservations"]
            orphans = sorted(
                i["InstanceId"]
                for r in found
                for i in r["Instances"]
                if i["InstanceId"] not in known
            )
            if not orphans:
                return
            if self.echo is not None:
                self.echo(f"aws: terminating {', '.join(orphans)} (started, never recorded)")
            ec2.terminate_instances(InstanceIds=orphans)
            ec2.get_waiter("instance_terminated").wait(
                InstanceIds=orphans, WaiterConfig={"Delay": 2, "MaxAttempts": 150}
            )
        except (BotoCoreError, ClientError, WaiterError) as exc:
            # Destroy still runs; the leak scan after it names whatever is left.
            if self.echo is not None:
                self.echo(f"aws: could not remove unrecorded instances first: {_why(exc)}")

    def _remove_unrecorded_identity(self, launched: Launched, tf: Terraform) -> None:
        """The nodes' role and instance profile (by the cluster's name prefix and tag)
        where Terraform's state lacks them: a create that IAM carried out but whose answer
        was lost, so that the provider's retry met "EntityAlreadyExists" and the apply
        failed without recording it.  Destroy would leave them."""
        from botocore.exceptions import BotoCoreError, ClientError

        cid = launched.cluster_id
        prefix = f"syndeo-{cid[:24]}-"
        known = set(tf.ids("aws_iam_role")) | set(tf.ids("aws_iam_instance_profile"))
        try:
            iam = self._client("iam", launched.tf.machines.get("region"))
            roles = [r for r in _named(iam, "roles", prefix) if r not in known]
            profiles = [p for p in _named(iam, "instance_profiles", prefix) if p not in known]
            for name in profiles:
                profile = iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]
                if _tagged(profile, cid):
                    self._say(f"aws: removing instance profile {name} (created, never recorded)")
                    for role in profile.get("Roles", []):
                        iam.remove_role_from_instance_profile(
                            InstanceProfileName=name, RoleName=role["RoleName"]
                        )
                    iam.delete_instance_profile(InstanceProfileName=name)
            for name in roles:
                if _tagged(iam.get_role(RoleName=name)["Role"], cid):
                    self._say(f"aws: removing role {name} (created, never recorded)")
                    _delete_role(iam, name)
        except (BotoCoreError, ClientError) as exc:
            # Destroy still runs; the leak scan after it names whatever is left.
            self._say(f"aws: could not remove an unrecorded role first: {_why(exc)}")

    def _say(self, line: str) -> None:
        if self.echo is not None:
            self.echo(line)

    def list_machines(self, launched: Launched) -> list[Machine] | None:
        """One DescribeInstances for the cluster's tag."""
        from botocore.exceptions import BotoCoreError, ClientError

        tag = [{"Name": "tag:syndeo-cluster", "Values": [launched.cluster_id]}]
        try:
            ec2 = self._client("ec2", launched.tf.machines.get("region"))
            found = ec2.describe_instances(Filters=tag)["Reservations"]
        except (BotoCoreError, ClientError):
            return None
        cid = launched.cluster_id
        return [m for r in found for i in r["Instances"] if (m := _machine(i, cid)) is not None]

    def leaks(self, launched: Launched) -> list[str]:
        """Everything of the cluster AWS still lists, by tag and by name (after destroy)."""
        from botocore.exceptions import BotoCoreError, ClientError

        cid = launched.cluster_id
        tag = [{"Name": "tag:syndeo-cluster", "Values": [cid]}]
        # The region the cluster ran in (a new shell's `down` has no [aws] settings).
        region = launched.tf.machines.get("region")
        found: list[str] = []
        try:
            ec2 = self._client("ec2", region)
            for call, key, ident, what in _TAGGED_EC2:
                items = getattr(ec2, call)(Filters=tag)[key]
                if key == "Reservations":
                    items = [i for r in items for i in r["Instances"]]
                found += [f"{what} {i[ident]}" for i in items if _state(i) not in _GONE]
            prefix = f"syndeo-{cid[:24]}-"
            iam = self._client("iam", region)
            found += [f"role {r}" for r in _named(iam, "roles", prefix)]
            found += [f"instance profile {p}" for p in _named(iam, "instance_profiles", prefix)]
            if launched.owns_rendezvous:
                bucket = launched.rendezvous.split("/")[2]
                buckets = self._client("s3", region).list_buckets()["Buckets"]
                found += [f"bucket {b['Name']}" for b in buckets if b["Name"] == bucket]
        except (BotoCoreError, ClientError) as exc:
            raise TargetError(
                f"aws: could not check what is left of cluster {cid}: {_why(exc)}"
            ) from None
        return found


def _quota_code(instance_type: str, spot: bool) -> str | None:
    """The vCPU quota an instance of ``instance_type`` counts against, if known."""
    family = instance_type.split(".")[0].lower()
    if family.startswith(("hpc", "mac")):
        return None
    prefix = re.match(r"[a-z]+", family)
    letters = prefix.group(0) if prefix else ""
    for cls in ("inf", "trn", "dl", "vt"):
        if letters.startswith(cls):
            key = "g" if cls == "vt" else cls
            break
    else:
        key = "u" if family.startswith("u-") else letters[:1]
        key = "standard" if key in tuple("acdhimrtz") else key
    codes = _QUOTAS.get(key)
    return None if codes is None else (codes[1] if spot else codes[0])


def _limit(exc: Exception) -> str:
    """The account-limit code in a failed apply's error, or ""."""
    found = re.search(rf"\b({'|'.join(_LIMITS)})\b", str(exc))
    return found.group(1) if found else ""


def _capacity(exc: Exception) -> str:
    """The capacity code in a failed apply's error, or "" if it failed otherwise."""
    found = re.search(rf"\b({'|'.join(_CAPACITY)})\b", str(exc))
    return found.group(1) if found else ""


def _machine(inst: dict[str, Any], cluster_id: str) -> Machine | None:
    """An instance of the cluster by its tags, ended with EC2's state and reason."""
    tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
    state, ended = _state(inst), None
    if state in (*_GONE, "stopping", "stopped"):
        why = inst.get("StateReason", {}).get("Message") or inst.get("StateTransitionReason")
        ended = f"EC2 lists its instance {inst['InstanceId']} as {state}"
        ended = f"{ended} ({why})" if why else ended
    return Machine.tagged(tags, cluster_id, ended)


def _state(item: dict[str, Any]) -> str:
    state = item.get("State", "")
    return str(state.get("Name", "") if isinstance(state, dict) else state).lower()


def _code(exc: Exception) -> str:
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))


def _lost_answer(exc: Exception) -> str:
    """The node role or instance profile a failed apply found already made by its own
    earlier try ("EntityAlreadyExists" on a name the module prefixed uniquely), or ""."""
    found = re.search(
        r"EntityAlreadyExists: (Role|Instance Profile)(?: with name)? "
        r"(syndeo-[\w+=,.@-]*[\w+=,@-]) already exists",
        str(exc),
    )
    return f"{found.group(1).lower()} {found.group(2)}" if found else ""


def _named(iam: Any, kind: str, prefix: str) -> list[str]:
    """The names of the account's IAM ``kind`` ("roles", "instance_profiles") that start
    with ``prefix``, every page of the list."""
    key, name = {
        "roles": ("Roles", "RoleName"),
        "instance_profiles": ("InstanceProfiles", "InstanceProfileName"),
    }[kind]
    pages = iam.get_paginator(f"list_{kind}").paginate()
    return [e[name] for page in pages for e in page[key] if e[name].startswith(prefix)]


def _tagged(entity: dict[str, Any], cluster_id: str) -> bool:
    """True if an IAM role or instance profile carries this cluster's tag."""
    tags = {t["Key"]: t["Value"] for t in entity.get("Tags", [])}
    return tags.get("syndeo-cluster") == cluster_id


def _delete_role(iam: Any, name: str) -> None:
    """Delete role ``name`` with what IAM requires gone first (its instance profiles'
    hold on it, its inline and attached policies)."""
    for profile in iam.list_instance_profiles_for_role(RoleName=name)["InstanceProfiles"]:
        iam.remove_role_from_instance_profile(
            InstanceProfileName=profile["InstanceProfileName"], RoleName=name
        )
    for policy in iam.list_role_policies(RoleName=name)["PolicyNames"]:
        iam.delete_role_policy(RoleName=name, PolicyName=policy)
    for policy in iam.list_attached_role_policies(RoleName=name)["AttachedPolicies"]:
        iam.detach_role_policy(RoleName=name, PolicyArn=policy["PolicyArn"])
    iam.delete_role(RoleName=name)


def _why(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__

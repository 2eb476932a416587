"""AWS: ``terraform/aws`` (private VPC, S3 rendezvous bucket, prefix-scoped role)."""

from __future__ import annotations

from syndeo.errors import ConfigError
from syndeo.targets.cloud import CloudTarget


class AwsTarget(CloudTarget):
    name = "aws"
    module = "aws"
    scheme = "s3"

    def check_credentials(self) -> None:
        # The standard chain Terraform's provider reads too (env, profile, SSO, IMDS).
        import boto3

        if boto3.session.Session().get_credentials() is None:
            raise ConfigError(
                "aws: no AWS credentials found (aws configure / aws sso login, or "
                "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)"
            )

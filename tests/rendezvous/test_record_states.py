"""Phases and job states are enums in the code and plain strings on the wire: a record
signed by a head that wrote the string verifies after the launcher reads it as the enum,
and what the enum writes is the same string."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from syndeo.core import launchkey
from syndeo.rendezvous import JobPhase, JobState, Phase, StatusRecord

KEY = "c3" * 32


def test_a_status_signed_over_the_plain_string_verifies_as_the_enum() -> None:
    # What a head signs: the record's fields as JSON, its phase a string.
    fields = {
        "cluster_id": "c",
        "attempt": 0,
        "phase": "serving",
        "nodes_expected": 2,
        "updated_at": 1.0,
    }
    record = StatusRecord.model_validate(fields)
    fields.update({k: v for k, v in record.model_dump(mode="json").items() if k not in fields})
    fields.pop("signature")
    wire = {**fields, "signature": launchkey.sign_record(KEY, "status", fields)}
    read = StatusRecord.model_validate_json(json.dumps(wire))
    assert read.phase is Phase.SERVING
    assert read.verified(KEY, "c", 0)
    # And the launcher's own records write the string, signed the same way.
    mine = StatusRecord(phase=Phase.DONE, nodes_expected=1, updated_at=2.0).signed(KEY)
    assert json.loads(mine.model_dump_json())["phase"] == "done"


def test_job_states_are_the_strings_jobs_and_followers_read() -> None:
    state = JobState(job_id="j00001-abcdef", state=JobPhase.INSTALLING)
    assert json.loads(state.model_dump_json())["state"] == "installing"
    assert JobState.model_validate({"job_id": "j", "state": "cancelled"}).state is (
        JobPhase.CANCELLED
    )
    with pytest.raises(ValidationError):
        JobState.model_validate({"job_id": "j", "state": "exploded"})

"""A job's output and its state's words reach the terminal as plain text
(syndeo/launcher/job_client.py).

Output and states come from the store (a job prints what it likes; a state is not
signed), so an OSC 52 sequence in them would set the clipboard of whoever runs
``logs``, a CSI one clear the screen or rewrite lines already shown.  The real file
rendezvous, a job signed with the cluster's key, and the real ``syndeo logs``; the
output comes in chunks cut inside an escape sequence and inside a UTF-8 character.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from syndeo.launcher import job_client
from syndeo.launcher.state import save_launched
from syndeo.rendezvous import JobSpec, JobState, open_rendezvous
from tests.support.launched import make_launched, spec_for

KEY = "cd" * 32
CID = "ttyjobs"
JOB = "j00001-abcdef"
CLIPBOARD = b"\x1b]52;c;ZWNobyBwd25lZA==\x07"  # OSC 52: "set the clipboard to ..."
CHUNKS = [
    b"step 1\n\x1b]52;c;ZWNob",  # the OSC cut in the middle
    b"yBwd25lZA==\x07step 2 \x1b[2J\x1b[H\x1b[31mred\x1b[0m\r\n",  # CSI: clear, home, colours
    b"caf\xc3",  # a character cut in two
    b"\xa9 \xc2\x9b6n\x1b]0;title\x1b\\bell\x07 8-bit \x9b?\tend\x1b",  # C1 CSI, OSC with ST
    b"c\x1b[1A\rdone\n",
]
SHOWN = "step 1\nstep 2 red\ncafé 6nbell 8-bit \ufffd?\tend\ndone\n"


def _job(tmp_path: Path, message: str) -> str:
    """A signed job of an ``up`` cluster saved for the launcher, its output in CHUNKS, its
    state saying ``message``; the cluster's rendezvous."""
    uri = (tmp_path / "rdv").as_uri()
    save_launched(
        make_launched(
            "local", CID, uri, time.time(), spec=spec_for("local", CID, uri, KEY), attempt=0
        )
    )
    rdv = open_rendezvous(uri, CID, launch_key=KEY)  # output is sealed with it
    rdv.check()
    spec = JobSpec(job_id=JOB, cluster_id=CID, attempt=0, command=["x"], submitted_at=time.time())
    rdv.submit_job(spec.signed(KEY))
    for seq, chunk in enumerate(CHUNKS):
        rdv.put_job_output(JOB, seq, chunk)
    rdv.put_job_state(JobState(job_id=JOB, state="failed", message=message, exit_code=3))
    return uri


def test_logs_show_the_output_without_terminal_control(tmp_path: Path, syndeo_home: Path) -> None:
    _job(tmp_path, "boom" + CLIPBOARD.decode() + "\x1b[1A\x1b[2K")
    proc = subprocess.run(
        [sys.executable, "-m", "syndeo", "logs", "--job", JOB, "--cluster-id", CID, "--follow"],
        cwd=tmp_path,
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 3, proc.stderr
    for shown in (proc.stdout, proc.stderr):
        assert b"\x1b" not in shown and b"\x9b" not in shown and b"\r" not in shown, shown
    assert proc.stdout.decode() == SHOWN
    assert f"job {JOB} failed (exit 3): boom" in proc.stderr.decode()


def test_each_chunk_as_it_comes(tmp_path: Path, syndeo_home: Path) -> None:
    """What the client shows, chunk by chunk, holds no control, and together it is all."""
    _job(tmp_path, "\x1b]52;c;ZXZpbA==\x1b\\ended \x07\x00\x7f")
    shown: list[bytes] = []
    state = job_client.logs(JOB, shown.append, cluster=job_client.open_cluster(CID))
    assert not [c for c in shown if b"\x1b" in c or b"\x9b" in c or b"\r" in c], shown
    assert b"".join(shown).decode() == SHOWN
    assert state is not None and state.message == "ended "
    [(_, listed)] = job_client.list_jobs(CID)[1]
    assert listed.message == "ended "

"""runs and fsutil: atomic creation, immutability, status settling, clear one-line errors."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from kts_helpers.errors import RunError
from kts_helpers.fsutil import atomic_write_bytes, atomic_write_json, atomic_write_text, write_new
from kts_helpers.run.runs import MANIFEST, create_run, find_run, latest_run, new_run_id, open_run
from kts_helpers.run.spec import ExperimentParams, resolve


def _spec(**params):
    params.setdefault("profile", "tiny")
    return resolve(ExperimentParams.from_mapping(params), "cpu").to_dict()


def _hidden(path):
    return sorted(p.name for p in path.rglob("*") if p.name.startswith(".") and p.name != ".lock")


def test_create_run_atomic_with_manifest(tmp_path):
    run = create_run(_spec(), {"host": "h"}, root=tmp_path, run_id="r1", label="my label")
    assert run.path == tmp_path / "r1" and run.run_id == "r1"
    assert [p.name for p in tmp_path.iterdir()] == ["r1"]  # no temporary directory left
    assert (run.path / "logs").is_dir()
    m = json.loads((run.path / MANIFEST).read_text())
    assert m["status"] == "running" and m["run_id"] == "r1" and m["label"] == "my label"
    assert m["environment"] == {"host": "h"} and m["scenarios"] == {}
    assert [s["name"] for s in m["spec"]["scenarios"]] == ["baseline-fft", "baseline-gemm", "shared"]
    assert _hidden(tmp_path) == []


def test_generated_run_ids_are_unique_and_safe(tmp_path):
    a = create_run(_spec(), {}, root=tmp_path, label="a b/c")
    b = create_run(_spec(), {}, root=tmp_path, label="a b/c")
    assert a.run_id != b.run_id
    assert "/" not in a.run_id and "tiny" in a.run_id and "a-b-c" in a.run_id
    assert new_run_id("tiny") != new_run_id("tiny")


def test_create_run_refuses_existing_id(tmp_path):
    run = create_run(_spec(), {}, root=tmp_path, run_id="same")
    before = run.manifest_path.read_bytes()
    with pytest.raises(RunError, match="already exists"):
        create_run(_spec(profile="cpu-quick"), {}, root=tmp_path, run_id="same")
    assert run.manifest_path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["same"]


@pytest.mark.parametrize("bad", ["a/b", ".hidden", "  "])
def test_create_run_refuses_bad_ids(tmp_path, bad):
    with pytest.raises(RunError, match="invalid run id"):
        create_run(_spec(), {}, root=tmp_path, run_id=bad)


def test_claim_scenario_never_overwrites(tmp_path):
    run = create_run(_spec(), {}, root=tmp_path, run_id="r")
    d = run.claim_scenario("shared")
    assert d == run.log_dir("shared") and d.is_dir()
    run.claim_scenario("shared")  # still empty: claiming again is harmless
    run.log_path("shared", "fft").write_text("KTS_APP,...\n")
    with pytest.raises(RunError, match="already has logs") as exc:
        run.claim_scenario("shared")
    assert "\n" not in str(exc.value)
    assert run.log_path("shared", "fft").read_text() == "KTS_APP,...\n"


def test_record_scenario_settles_status(tmp_path):
    run = create_run(_spec(), {}, root=tmp_path, run_id="r")
    run.record_scenario("calibration", {"status": "complete"})
    assert run.manifest()["status"] == "running"
    run.record_scenario("baseline-fft", {"status": "complete"})
    run.record_scenario("baseline-gemm", {"status": "complete"})
    assert run.manifest()["status"] == "running"
    assert run.scenario_status("baseline-gemm") == "complete"
    assert run.scenario_status("shared") is None
    m = run.record_scenario("shared", {"status": "complete"})
    assert m["status"] == "complete" == run.manifest()["status"]
    assert set(m["scenarios"]) == {"calibration", "baseline-fft", "baseline-gemm", "shared"}


def test_record_scenario_failed_wins(tmp_path):
    run = create_run(_spec(), {}, root=tmp_path, run_id="r")
    run.record_scenario("baseline-fft", {"status": "failed"})
    assert run.manifest()["status"] == "failed"
    run.record_scenario("baseline-gemm", {"status": "complete"})
    run.record_scenario("shared", {"status": "complete"})
    assert run.manifest()["status"] == "failed"


def test_failed_calibration_does_not_change_status(tmp_path):
    run = create_run(_spec(), {}, root=tmp_path, run_id="r")
    run.record_scenario("calibration", {"status": "failed"})
    assert run.manifest()["status"] == "running"


def test_update_merges_and_keeps_manifest_whole(tmp_path):
    run = create_run(_spec(), {}, root=tmp_path, run_id="r")
    run.update(calibration={"floor_ms": 0.0})
    m = run.manifest()
    assert m["calibration"] == {"floor_ms": 0.0} and m["status"] == "running" and "updated_at" in m
    assert _hidden(tmp_path) == []


def test_concurrent_records_are_all_kept(tmp_path):
    run = create_run(_spec(workloads="fft,gemm,llm", repeats=3), {}, root=tmp_path, run_id="r")
    names = [s["name"] for s in run.manifest()["spec"]["scenarios"]]
    threads = [threading.Thread(target=run.record_scenario, args=(n, {"status": "complete"})) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    m = run.manifest()
    assert set(m["scenarios"]) == set(names) and m["status"] == "complete"


def test_atomic_writes_leave_no_temp_files(tmp_path):
    atomic_write_bytes(tmp_path / "a" / "b.bin", b"\x00\x01")
    atomic_write_text(tmp_path / "t.txt", "héllo")
    atomic_write_json(tmp_path / "j.json", {"b": 1, "a": [1, 2]})
    atomic_write_json(tmp_path / "j.json", {"c": 3})  # replace whole
    assert (tmp_path / "a" / "b.bin").read_bytes() == b"\x00\x01"
    assert (tmp_path / "t.txt").read_text(encoding="utf-8") == "héllo"
    assert json.loads((tmp_path / "j.json").read_text()) == {"c": 3}
    assert _hidden(tmp_path) == []


def test_atomic_write_failure_cleans_up(tmp_path):
    class Unserialisable:
        def __str__(self):
            raise RuntimeError("no")

    atomic_write_json(tmp_path / "j.json", {"ok": 1})
    with pytest.raises(RuntimeError):
        atomic_write_json(tmp_path / "j.json", {"bad": Unserialisable()})
    assert json.loads((tmp_path / "j.json").read_text()) == {"ok": 1}
    assert _hidden(tmp_path) == []


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077], ids=oct)
def test_atomic_writes_respect_the_umask(tmp_path, umask):
    """A written file has the mode any new file gets under the user's umask (0644 under 0022), also when it
    replaces one, so a web server can publish a report or a run as written."""
    old = os.umask(umask)
    try:
        paths = [atomic_write_text(tmp_path / "report.html", "<p>"), atomic_write_json(tmp_path / "i.json", {}),
                 write_new(tmp_path / "raw.log", b"x")]
        (tmp_path / "plain").write_text("y")  # what open() gives, for comparison
        paths.append(atomic_write_text(tmp_path / "report.html", "<p>again"))
    finally:
        os.umask(old)
    want = 0o666 & ~umask
    assert stat.S_IMODE((tmp_path / "plain").stat().st_mode) == want
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in paths} == {p.name: oct(want) for p in paths}


def test_write_new_refuses_existing(tmp_path):
    p = write_new(tmp_path / "raw.log", b"first")
    with pytest.raises(FileExistsError):
        write_new(p, b"second")
    assert p.read_bytes() == b"first"
    assert _hidden(tmp_path) == []


def test_open_run_errors_are_one_line(tmp_path):
    with pytest.raises(RunError, match="does not exist") as e1:
        open_run(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunError, match="not a run directory") as e2:
        open_run(tmp_path / "empty")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / MANIFEST).write_text("{not json")
    with pytest.raises(RunError, match="not valid JSON") as e3:
        open_run(tmp_path / "bad")
    (tmp_path / "future").mkdir()
    (tmp_path / "future" / MANIFEST).write_text(json.dumps({"format_version": 99}))
    with pytest.raises(RunError, match="newer kts") as e4:
        open_run(tmp_path / "future")
    for e in (e1, e2, e3, e4):
        assert "\n" not in str(e.value)


def test_find_and_latest_run(tmp_path):
    with pytest.raises(RunError, match="no runs"):
        latest_run(tmp_path)
    a = create_run(_spec(), {}, root=tmp_path, run_id="20240101-a")
    b = create_run(_spec(), {}, root=tmp_path, run_id="20240102-b")
    assert latest_run(tmp_path).path == b.path
    assert find_run("20240101-a", root=tmp_path).path == a.path
    assert find_run(str(a.path)).path == a.path


def test_git_commit_names_the_kit_only_where_it_is_the_repository_root(tmp_path, monkeypatch):
    """A copy of the kit inside another checkout (an ignored folder) must not record that checkout's HEAD."""
    import subprocess

    from kts_helpers.run.environment import git_commit

    outer = tmp_path / "outer"
    (outer / "copy").mkdir(parents=True)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    subprocess.run(["git", "init", "-q", str(outer)], check=True)
    (outer / "f").write_text("x")
    subprocess.run(["git", "-C", str(outer), "add", "f"], check=True)
    subprocess.run(["git", "-C", str(outer), "commit", "-q", "-m", "c"], check=True)
    sha = subprocess.run(["git", "-C", str(outer), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    monkeypatch.delenv("KTS_GIT_COMMIT", raising=False)
    assert git_commit(outer) == {"commit": sha, "dirty": False}
    assert git_commit(outer / "copy") == {"commit": None, "dirty": None}
    monkeypatch.setenv("KTS_GIT_COMMIT", "a" * 40)
    assert git_commit(outer / "copy")["commit"] == "a" * 40


def test_an_interrupted_attempt_is_set_aside_and_kept_never_a_recorded_one(tmp_path):
    """``kts run --resume`` re-runs a scenario the client's death cut off: its partial logs move, whole, to
    ``interrupted/<scenario>.<k>/`` (named in the manifest), so the logs directory is free again; a recorded
    scenario's logs are the run's data and are refused."""
    run = create_run(_spec(), {}, root=tmp_path, run_id="r")
    assert run.set_aside_interrupted("shared") is None  # nothing ran: nothing to keep
    for k in (1, 2):
        run.claim_scenario("shared")
        run.log_path("shared", "fft").write_text(f"KTS_META attempt {k}\n")
        kept = run.set_aside_interrupted("shared")
        assert kept == run.path / "interrupted" / f"shared.{k}"
        assert (kept / "fft.log").read_text() == f"KTS_META attempt {k}\n"
        assert not run.log_dir("shared").exists()
    run.claim_scenario("shared")  # free again: the scenario can run
    assert [e["logs"] for e in run.manifest()["interrupted"]] == ["interrupted/shared.1", "interrupted/shared.2"]
    run.claim_scenario("baseline-fft")
    run.log_path("baseline-fft", "fft").write_text("data\n")
    run.record_scenario("baseline-fft", {"status": "complete"})
    with pytest.raises(RunError, match="is recorded"):
        run.set_aside_interrupted("baseline-fft")
    assert run.log_path("baseline-fft", "fft").read_text() == "data\n"


@pytest.mark.e2e
def test_resume_reruns_a_scenario_cut_off_mid_way_and_keeps_its_partial_logs(tmp_path, capsys):
    """The local backend, end to end through the CLI: a run whose client died during ``shared`` (its logs written,
    no record) resumes, runs ``shared`` again and completes; the cut-off attempt's logs are kept and named."""
    from kts_helpers import cli

    root = tmp_path / "runs"
    assert cli.main(["run", "--profile", "tiny", "--device", "cpu", "--root", str(root), "--quiet",
                     "--set", "iterations=20"]) == 0
    run = latest_run(root)
    m = run.manifest()
    del m["scenarios"]["shared"]  # what a client killed during the shared scenario leaves: logs, no record
    m["status"] = "running"
    run.manifest_path.write_text(json.dumps(m))
    partial = {p.name: p.read_bytes() for p in run.log_dir("shared").iterdir()}
    # each local worker's pid, on disk from its start (what a resume checks before it re-runs anything)
    assert {f"{t}.pid" for t in ("fft", "gemm")} <= set(partial) and int(partial["fft.pid"]) > 0
    capsys.readouterr()
    assert cli.main(["run", "--resume", run.run_id, "--root", str(root)]) == 0
    assert "the interrupted attempt of shared is kept in" in capsys.readouterr().err
    after = run.read()
    assert after.status == "complete" and after.record("shared").status == "complete"
    kept = run.path / "interrupted" / "shared.1"
    assert {p.name: p.read_bytes() for p in kept.iterdir()} == partial
    assert {p.name for p in run.log_dir("shared").iterdir()} == set(partial)  # the new attempt's own logs


def _exec_ed(argv):
    """A child whose command line is ``argv`` already (between fork and exec /proc shows the parent's)."""
    import subprocess
    import time

    p = subprocess.Popen(argv)
    for _ in range(500):
        try:
            if argv[-1].encode() in Path(f"/proc/{p.pid}/cmdline").read_bytes():
                return p
        except OSError:
            pass
        time.sleep(0.01)
    p.kill()
    raise AssertionError(f"{argv} did not start")


def test_resume_refuses_while_the_cut_off_attempts_workers_still_run(tmp_path):
    """A client killed mid-scenario leaves its workers running (each in its own session): resuming beside them
    would share the GPU with them, so it refuses in one line naming the pid, and moves nothing; once they are
    gone it proceeds. A pid whose command line is not a worker's (reused) does not count."""
    import sys

    from kts_helpers.run.experiment import resume_experiment, workers_still_running

    run = create_run(_spec(), {}, root=tmp_path, run_id="r")
    (shared,) = [s for s in run.read().spec.scenarios if s.name == "shared"]
    assert sorted(t.name for t in shared.tenants) == ["fft", "gemm"]
    run.claim_scenario("shared")
    worker = _exec_ed([sys.executable, "-c", "import time; time.sleep(60)", "workers/kts_worker.py"])
    stranger = _exec_ed([sys.executable, "-c", "import time; time.sleep(60)", "not-the-worker"])
    try:
        # the worker as the H200 showed it: its log still empty (model load, profile), its pid on disk
        for tenant, proc in (("fft", worker), ("gemm", stranger)):
            run.log_path("shared", tenant).write_text("")
            run.pid_path("shared", tenant).write_text(f"{proc.pid}\n")
        assert workers_still_running(run, shared) == [worker.pid]
        with pytest.raises(RunError, match=rf"interrupted attempt of shared .* still runs \(worker pid {worker.pid}\)"):
            resume_experiment(str(run.path), progress=False)
        assert sorted(p.name for p in run.log_dir("shared").iterdir()) == ["fft.log", "fft.pid", "gemm.log", "gemm.pid"]
        assert "interrupted" not in run.manifest()
    finally:
        for p in (worker, stranger):
            p.kill()
            p.wait()
    assert workers_still_running(run, shared) == []

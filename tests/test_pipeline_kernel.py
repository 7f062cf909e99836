"""The pipeline's kernels are quiet: encrypted sockets (no plain-TCP warning) and no SIGINT at shutdown."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import nbformat

from kts_helpers.present.pipeline import _execute

# A child of the kernel, in the kernel's process group: it records a SIGINT sent to that group.
CHILD = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", '''
import pathlib, signal, sys, time
signal.signal(signal.SIGINT, lambda *a: (pathlib.Path(sys.argv[1]).write_text("SIGINT"), sys.exit(0)))
print("ready", flush=True)
time.sleep(60)
''', {marker!r}], stdout=subprocess.PIPE, text=True)
child.stdout.readline()
open({pidfile!r}, "w").write(str(child.pid))
"""


def _notebook(tmp_path: Path, source: str) -> Path:
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    nb.cells = [nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell(source)]
    path = tmp_path / "probe.ipynb"
    nbformat.write(nb, path)
    return path


def test_a_pipeline_kernel_prints_nothing_on_the_terminal(tmp_path: Path, capfd) -> None:
    src = _notebook(tmp_path, "print('to the notebook, not the terminal'); x")
    _execute(src, tmp_path / "out.ipynb", {}, tmp_path)
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")
    executed = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert executed.cells[-1].outputs[0]["text"] == "to the notebook, not the terminal\n"


def test_shutdown_sends_no_sigint_to_the_kernel(tmp_path: Path) -> None:
    marker, pidfile = tmp_path / "sigint", tmp_path / "child.pid"
    src = _notebook(tmp_path, CHILD.format(marker=str(marker), pidfile=str(pidfile)))
    try:
        _execute(src, tmp_path / "out.ipynb", {}, tmp_path)
        assert pidfile.exists()  # the child ran and was listening
        time.sleep(1.0)  # a signal sent at shutdown would have been handled by now
        assert not marker.exists(), "the kernel's process group got a SIGINT at shutdown"
    finally:
        if pidfile.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_what_the_kernel_process_writes_outside_its_cells_goes_to_its_log(tmp_path: Path, capfd) -> None:
    """ipykernel sends a cell's output to the notebook; what the process itself writes to its stderr (a shutdown
    race's ZMQ traceback on a loaded machine) goes to ``<notebook>.kernel.log``, never to the terminal."""
    # fd 2 of the kernel process (ipykernel captures sys.stderr for the notebook, not the descriptor here)
    src = _notebook(tmp_path, "import os; os.write(2, b'the kernel process itself\\n')")
    _execute(src, tmp_path / "out.ipynb", {}, tmp_path)
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")
    # the line written, first; a loaded host may add the shutdown race's ZMQ traceback after it, which is what the
    # log is for (it stays off the terminal: the assertion above)
    assert (tmp_path / "out.kernel.log").read_text().startswith("the kernel process itself\n")
    # a quiet kernel leaves no log behind
    _execute(_notebook(tmp_path, "x"), tmp_path / "quiet.ipynb", {}, tmp_path)
    assert not (tmp_path / "quiet.kernel.log").exists()

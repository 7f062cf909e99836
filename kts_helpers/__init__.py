"""kts_helpers: the helper package behind the kts notebooks.

One module per concern: ``spec`` (what to run), ``runs`` (immutable run directories),
``backends`` (local processes, Kubernetes), ``telemetry`` (NVML/DCGM), ``logparse``
(KTS_APP lines), ``analysis`` and ``stats`` (numbers), ``plots`` (Altair), ``report``
(papermill + nbconvert pipeline), ``cli`` (``python -m kts_helpers`` / ``kts``).
Importing the package is cheap: heavy dependencies load in the modules that need them.
"""

__version__ = "0.1.0"

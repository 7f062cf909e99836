"""An example of bringing your own workload to kts: a factory ``(torch, device, params) -> Workload``.

Run it as a tenant next to the kit's FFT (the folder holding this file on ``PYTHONPATH``)::

    PYTHONPATH=examples kts run --set workloads=fft,my_tenants:make_mlp_server \
        --set 'workload_params={"my_tenants:make_mlp_server": {"batch": 64}}'

The factory builds everything once (weights, inputs); ``step()`` returns one iteration's operations as
``(phase, callable)`` pairs, which the kit times one by one. It imports only torch: the worker hands it in, so this
file runs wherever the worker does. The result may be the worker's own ``Workload`` or any object with the same
attributes (``name``, ``step``, optionally ``flops_per_op``, ``bytes_per_op``, ``notes``): the worker's module is
not importable by name inside the container, and duck typing keeps the factory free of kts imports.
"""

from __future__ import annotations

from types import SimpleNamespace


def make_mlp_server(torch, device, params):
    """A two-phase inference server: an embedding lookup, then a 3-layer MLP over a batch of requests."""
    batch = int(params.get("batch", 32))
    width = int(params.get("width", 1024 if params.get("device_type") == "cuda" else 64))
    torch.manual_seed(int(params.get("seed", 0)))
    with device:
        table = torch.nn.Embedding(10_000, width)
        mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
                                  torch.nn.Linear(4 * width, 4 * width), torch.nn.GELU(),
                                  torch.nn.Linear(4 * width, width))
        ids = torch.randint(0, 10_000, (batch,))
    state = {}

    def embed():
        with torch.inference_mode():
            state["x"] = table(ids)

    def forward():
        with torch.inference_mode():
            return mlp(state["x"])

    params_n = sum(p.numel() for p in mlp.parameters())
    return SimpleNamespace(name="mlp-server", step=lambda: [("embed", embed), ("mlp", forward)],
                           flops_per_op=2.0 * params_n * batch, notes={"batch": batch, "width": width})

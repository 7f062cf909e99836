"""Command line: ``python -m kts_helpers`` (installed as ``kts``).

    kts run        [--profile P] [--device D] [--set key=value ...]     run the experiment, no notebooks
    kts run        --resume RUN_ID                                      continue a run whose client went away
    kts report     [--profile P] [--device D] [--run DIR] [--set ...]   notebooks -> HTML report
    kts summarize  --baseline FILE... --shared FILE... [--metric device|wall|wait] [--trim N]
                   [--no-clip] [--format json|table] [--ci] [--resamples N] [--seed S]
    kts probe      [--device D] [--run DIR] [--multi] [--json] [--set ...]  the GPU's time slice and switch cost
    kts plan       --from-run RUN [--probe P] [--format json|table]    predict a run's shared scenarios from alone
    kts plan       --capacity --from-run RUN --slo fft=1.0 [--max-slow-share X] [--sleep fft=50] [--rate w=H]
                   [--configmap-out FILE]                               how many replicas meet every goal
    kts plan       --validate --from-run RUN --slo ...                  run the recommended N and N+1, check them
    kts teach      [--run DIR] [--set key=value ...]                    the teaching notebook -> HTML
    kts index                                                           rebuild report/index.html

Every failure the kit expects prints one line ``kts: error: ...`` and exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kts_helpers.errors import SpecError, run_command
from kts_helpers.fsutil import atomic_write_text
from kts_helpers.run.corun import Judge
from kts_helpers.run.experiment import resume_experiment, run_experiment
from kts_helpers.run.looks import BlockJudge
from kts_helpers.run.params import parse_sets, split_analysis
from kts_helpers.run.runs import find_run


def _params(args: argparse.Namespace) -> dict[str, Any]:
    params = parse_sets(args.set)
    for key in ("profile", "device", "backend", "label"):
        val = getattr(args, key, None)
        if val:
            params[key] = val
    return params


def _judge() -> Judge | None:
    """The interim looks' judge (shared_max_factor > 1): it needs the analysis stack, which a bare GPU host may
    lack; without it every look is answered "go" and the tenants time to their maximum (the fixed design)."""
    try:
        from kts_helpers.analyse.sequential import VerdictJudge  # pandas: absent on a bare GPU host
    except ImportError as exc:
        print(f"kts: note: interim looks time on to the maximum here ({exc.name} is not installed)", file=sys.stderr)
        return None
    return VerdictJudge()


def _block_judge() -> BlockJudge | None:
    """``blocks=auto``'s judge: the analysis stack reads each look's verdicts; without it (a bare GPU host) no look
    decides and the run takes its whole budget."""
    try:
        from kts_helpers.analyse.blockseq import BlocksJudge  # pandas: absent on a bare GPU host
    except ImportError as exc:
        print(f"kts: note: blocks=auto runs its whole budget here ({exc.name} is not installed)", file=sys.stderr)
        return None
    return BlocksJudge()


def cmd_run(args: argparse.Namespace) -> int:
    if args.resume:
        given = [f"--{k.replace('_', '-')}" for k in ("profile", "device", "label", "set", "run_id")
                 if getattr(args, k, None)]
        if given:
            raise SpecError(f"--resume continues a run with its own parameters; drop {', '.join(given)}")
        if args.backend:
            used = find_run(args.resume, args.root).read().backend
            if used != args.backend:
                raise SpecError(f"run {args.resume} used the {used} backend, not {args.backend}")
        run = resume_experiment(args.resume, root=args.root, progress=not args.quiet)
        print(run.path)
        return 0 if run.manifest()["status"] == "complete" else 1
    run = run_experiment(_params(args), run_id=args.run_id, root=args.root, progress=not args.quiet,
                         judge=_judge(), block_judge=_block_judge())
    print(run.path)
    return 0 if run.manifest()["status"] == "complete" else 1


def cmd_report(args: argparse.Namespace) -> int:
    from kts_helpers.present.pipeline import build_report  # pandas: absent on a bare GPU host

    html = build_report(_params(args), run_dir=args.run, runs_root=args.root, report_dir=args.report_dir,
                        notebooks_dir=args.notebooks)
    print(html)
    return 0


def cmd_probe(args: argparse.Namespace) -> int:
    """Run the time-slice probe (or read an existing probe run) and print its reading."""
    if args.run:
        run_dir = Path(args.run)
    else:
        params = {**_params(args), "profile": "probe"}
        params.setdefault("device", "cuda")
        if args.multi:
            params["probe_mode"] = "multi"
        run = run_experiment(params, run_id=args.run_id, root=args.root, progress=not args.quiet)
        if run.manifest()["status"] != "complete":
            print(f"kts: error: the probe run {run.path} did not complete; see its manifest", file=sys.stderr)
            return 1
        run_dir = run.path
    try:
        from kts_helpers.analyse.load import load_run  # pandas: absent on a bare GPU host
        from kts_helpers.analyse.probe import is_multi_probe, read_multi, read_probe  # pandas, likewise

        data = load_run(run_dir)
        reading = read_multi(data) if is_multi_probe(data) else read_probe(data, n_resamples=args.resamples)
    except ImportError as exc:  # a bare GPU host runs the probe with torch alone; reading needs the analysis stack
        print(str(run_dir))
        print(f"kts: note: the probe run is complete; reading it needs the kit's analysis packages ({exc}): "
              f"run kts probe --run {run_dir} where they are installed", file=sys.stderr)
        return 0
    if args.json:
        print(json.dumps({"run_dir": str(run_dir), **reading.to_dict()}, indent=2, default=str))
    else:
        print(str(run_dir))
        print("\n".join(reading.lines()))
    return 0


def _pairs(items: list[str] | None, what: str) -> dict[str, float]:
    """``["fft=1.0", ...]`` (or one comma-separated string) as {name: number}; a bad one is a one-line error."""
    out: dict[str, float] = {}
    for item in ",".join(items or []).split(","):
        if not item.strip():
            continue
        name, sep, value = item.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep or not name.strip():
            raise SpecError(f"{what} takes workload=number (e.g. fft=1.0), got {item!r}")
    return out


def cmd_plan(args: argparse.Namespace) -> int:
    """Predict shared scenarios from alone runs (--from-run), answer a capacity question, or validate it."""
    from kts_helpers.plan import engine  # pandas: absent on a bare GPU host

    if not args.from_run:
        raise SpecError("kts plan needs --from-run RUN (a run whose alone baselines describe the tenants)")
    if not Path(args.from_run).is_dir():
        raise SpecError(f"--from-run {args.from_run}: no such run directory")
    from kts_helpers.plan.inputs import (  # pandas: absent on a bare GPU host
        load_plan_input,
        mix_of,
        predict_input,
    )

    # the flags' syntax first: a typo is one line on stderr, before the run is read and its notes printed
    sleeps, rates, slo = _pairs(args.sleep, "--sleep"), _pairs(args.rate, "--rate"), _pairs(args.slo, "--slo")
    inp = load_plan_input(args.from_run, args.probe, args.multi_probe)  # the one time the run is opened
    for line in inp.notes() + inp.fallbacks() + inp.profile_warnings():
        print(f"kts plan: {line}", file=sys.stderr)
    if args.capacity or args.validate:
        from kts_helpers.plan.capacity import (  # pandas: absent on a bare host
            capacity,
            parse_goals,
            with_cadence,
        )

        mix = [with_cadence(p, sleeps.get(p.workload), rates.get(p.workload)) for p in mix_of(inp)]
        goals = parse_goals(slo, args.max_slow_share, [p.workload for p in mix])
        answer = capacity(mix, goals, inp.gpu, max_n=args.max_n)  # type: ignore[arg-type]
        if args.configmap_out and not answer.feasible:
            raise SpecError(f"no N meets every goal, so no ConfigMap was written to {args.configmap_out}: "
                            f"{answer.recommendation}")
        if args.configmap_out:
            atomic_write_text(Path(args.configmap_out), answer.configmap)
        if args.validate:
            from kts_helpers.plan.live import validate_capacity  # pandas: absent on a bare GPU host

            print(validate_capacity(answer, inp, root=args.root, progress=not args.quiet,
                                    overrides=parse_sets(args.set)))
            return 0
        print(json.dumps(answer.to_dict(), indent=2) if args.format == "json" else answer.table())
        return 0
    rows = predict_input(inp, replicates=args.replicates or engine.DEFAULT_REPLICATES)
    if args.format == "json":
        keys = ("scenario", "tenant", "metric", "phase", "p50_ms", "p99_ms", "p99_lo", "p99_hi")
        print(json.dumps([{**{k: r.to_dict()[k] for k in keys}, **r.to_dict()} for r in rows], indent=2))
    else:
        print(engine.predictions_table(rows))
    return 0


def cmd_teach(args: argparse.Namespace) -> int:
    from kts_helpers.present.pipeline import build_teaching  # pandas: absent on a bare GPU host

    params = parse_sets(args.set)
    if args.run:
        params["run_dir"] = str(Path(args.run).resolve())
    print(build_teaching(params, report_dir=args.report_dir, notebooks_dir=args.notebooks))
    return 0


def cmd_reference_table(args: argparse.Namespace) -> int:
    from kts_helpers.present.reference import reference_markdown  # pandas: absent on a bare GPU host

    print(reference_markdown(args.run))
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from kts_helpers.present.html import write_index  # pandas: absent on a bare GPU host

    print(write_index(args.report_dir))
    return 0


def cmd_summarize(args: argparse.Namespace) -> int:
    from kts_helpers.analyse.load import load_logs  # pandas: absent on a bare GPU host
    from kts_helpers.analyse.summary import (  # pandas: absent on a bare GPU host
        summarize_frame,
        summary_records,
    )

    frame, parsed = load_logs(args.baseline or [], args.shared or [], clip=not args.no_clip, trim=args.trim)
    table = summarize_frame(frame, args.metric)
    if args.ci:
        from kts_helpers.analyse.intervals import add_intervals  # pandas: absent on a bare GPU host

        _, opts = split_analysis({"interval": args.interval, "margin": args.margin,
                                  **({"slo_ms": parse_sets(args.slo)} if args.slo else {})})
        table = add_intervals(table, frame, args.metric, n_resamples=args.resamples, seed=args.seed,
                              method=opts["ci_method"], margin=opts["margin"], slo_ms=opts.get("slo_ms"))
    if parsed.malformed or parsed.other or parsed.n_rejected:
        why = "; ".join(f"{v} {k}" for k, v in parsed.rejected.items())
        rejected = f", {parsed.n_rejected} impossible one(s) ({why})" if parsed.n_rejected else ""
        print(f"kts: note: skipped {parsed.malformed} malformed KTS_APP line(s){rejected} and {parsed.other} other "
              "line(s)", file=sys.stderr)
    if args.format == "json":
        print(json.dumps(summary_records(table), indent=2))
    else:
        print(format_table(table))
    return 0


def format_table(table: Any) -> str:
    cols = [c for c in ("workload", "tenant", "kind", "phase", "metric", "n", "p50_ms", "p95_ms", "p99_ms",
                        "mean_ms", "jitter", "throughput_per_s", "df", "reading") if c in table]
    shown = table[cols].copy()
    if "phase" in shown and shown["phase"].nunique() <= 1:
        shown = shown.drop(columns="phase")
    return shown.to_string(index=False, float_format=lambda v: f"{v:.4f}", na_rep="")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kts", description="GPU time-slicing contention research kit")
    sub = p.add_subparsers(dest="command", required=True)

    def experiment_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--profile", help="article | saturating | probe | cpu-quick | tiny (default: by device)")
        sp.add_argument("--device", help="auto | cpu | cuda")
        sp.add_argument("--backend", help="local | kubernetes")
        sp.add_argument("--label", help="a free-text label shown in the report")
        sp.add_argument("--set", action="append", metavar="KEY=VALUE", help="any other parameter")
        sp.add_argument("--root", default="data/runs", help="where run directories live")

    r = sub.add_parser("run", help="run the experiment (setup, baseline, shared) without notebooks")
    experiment_args(r)
    r.add_argument("--run-id", help="the new run's directory name (default: time, profile, label, random suffix)")
    r.add_argument("--resume", metavar="RUN_ID", help="continue this run (Kubernetes: collect what completed "
                                                   "while the client was away)")
    r.add_argument("--quiet", action="store_true", help="no progress bars")
    r.set_defaults(func=cmd_run)

    rep = sub.add_parser("report", help="execute the notebooks with papermill and render the HTML report")
    experiment_args(rep)
    rep.add_argument("--run", help="re-analyse this existing run directory instead of running")
    rep.add_argument("--report-dir", default="report", help="where the HTML, index and build/ go (default: report)")
    rep.add_argument("--notebooks", default="notebooks", help="the notebooks to execute (default: notebooks)")
    rep.set_defaults(func=cmd_report)

    pr = sub.add_parser("probe", help="measure the GPU's effective time slice and switch cost (GPU only)")
    pr.add_argument("--device", help="cuda (default) or cuda:N; a CPU has no time slice and is refused")
    pr.add_argument("--label", help="a free-text label shown in the report")
    pr.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="probe parameters: rate_hz, duration_s, gemm_size (default: calibrated), ...")
    pr.add_argument("--root", default="data/runs", help="where run directories live")
    pr.add_argument("--run", help="read this existing probe run instead of running one")
    pr.add_argument("--run-id", help="the new probe run's directory name (default: time, profile, random suffix)")
    pr.add_argument("--multi", action="store_true", help="the multi-context mode: the tick next to k = 1, 2, 3 "
                    "busy neighbours with kernels shorter and longer than the quantum (~2.5 min on an H200)")
    pr.add_argument("--json", action="store_true", help="the reading as JSON")
    pr.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples per interval (default: 2000)")
    pr.add_argument("--quiet", action="store_true", help="no progress bars")
    pr.set_defaults(func=cmd_probe)

    pl = sub.add_parser("plan", help="predict sharing from alone runs; how many replicas meet every goal")
    pl.add_argument("--from-run", help="the run whose manifest and alone baselines describe the tenants")
    pl.add_argument("--probe", help="a time-slice probe run (default: the committed probe of the run's GPU model)")
    pl.add_argument("--multi-probe", help="a multi-context probe run (default: the committed one, if any)")
    pl.add_argument("--format", choices=["json", "table"], default="table", help="output (default: table)")
    pl.add_argument("--replicates", type=int, help="simulated runs per scenario (default: 39, the fewest whose "
                    "range is a 95 %% prediction interval)")
    pl.add_argument("--capacity", action="store_true", help="N = 1..8 pods from the run's workloads in turn: "
                    "the largest N meeting every goal under time-slicing and MPS")
    pl.add_argument("--slo", action="append", metavar="WORKLOAD=MS", help="a wall-clock p99 goal, e.g. fft=1.0")
    pl.add_argument("--max-slow-share", type=float, help="at most this share of iterations above the SLO "
                    "(or the tenant's alone p99)")
    pl.add_argument("--sleep", action="append", metavar="WORKLOAD=MS", help="another cadence: the sleep (ms)")
    pl.add_argument("--rate", action="append", metavar="WORKLOAD=HZ", help="another cadence: Poisson arrivals")
    pl.add_argument("--max-n", type=int, default=8, help="the largest N tried (default: 8)")
    pl.add_argument("--configmap-out", help="write the device plugin's ConfigMap for the recommended N here")
    pl.add_argument("--validate", action="store_true", help="run the recommended N and N+1 on this GPU (through "
                    "kts run) and print predicted against measured")
    pl.add_argument("--root", default="data/runs", help="where --validate's run directories go")
    pl.add_argument("--set", action="append", metavar="KEY=VALUE", help="--validate: another run parameter "
                    "(e.g. iterations=200; device=cpu to try it without a GPU)")
    pl.add_argument("--quiet", action="store_true", help="no progress bars")
    pl.set_defaults(func=cmd_plan)

    t = sub.add_parser("teach", help="render the teaching notebook (time-slicing simulator)")
    t.add_argument("--run", help="fit the simulator to this run directory")
    t.add_argument("--set", action="append", metavar="KEY=VALUE", help="a notebook parameter")
    t.add_argument("--report-dir", default="report", help="where the HTML goes (default: report)")
    t.add_argument("--notebooks", default="notebooks", help="where the teaching notebook is (default: notebooks)")
    t.set_defaults(func=cmd_teach)

    rt = sub.add_parser("reference-table", help="the README's table for a (reference) run, as Markdown")
    rt.add_argument("run", help="run directory")
    rt.set_defaults(func=cmd_reference_table)

    idx = sub.add_parser("index", help="rebuild report/index.html")
    idx.add_argument("--report-dir", default="report", help="the directory of rendered reports (default: report)")
    idx.set_defaults(func=cmd_index)

    s = sub.add_parser("summarize", help="summarise KTS_APP v1/v2 log files")
    s.add_argument("--baseline", nargs="+", type=Path, help="logs of workloads run alone")
    s.add_argument("--shared", nargs="+", type=Path, help="logs of workloads run together")
    s.add_argument("--metric", choices=["device", "wall", "wait"], default="device",
                   help="device: CUDA events (v1 logs only have this); wall: launch->completion (a CPU run: from "
                   "when the operation was due); wait: wall-device")
    s.add_argument("--trim", type=int, default=0, help="drop the first N timed iterations of each workload per file")
    s.add_argument("--no-clip", action="store_true", help="keep shared iterations outside the overlap window")
    s.add_argument("--format", choices=["json", "table"], default="table",
                   help="table: aligned text for a terminal (default); json: one object per row")
    s.add_argument("--ci", action="store_true", help="add 95 %% intervals (order-statistic, coverage-tested) and "
                   "each shared row's verdict ('reading': degraded / faster when shared / no change within "
                   "±margin / inconclusive)")
    s.add_argument("--interval", choices=["order", "bootstrap", "stationary", "circular", "iid"], default="order",
                   help="with --ci: the interval method; a bootstrap only for comparison (default: order)")
    s.add_argument("--margin", type=float, default=0.10, help="with --ci: 'no change' only within 1 ± margin "
                   "(default: 0.10)")
    s.add_argument("--slo", action="append", metavar="TENANT=MS", help="with --ci: count slow iterations beyond "
                   "this latency goal instead of the tenant's alone p99 (repeatable)")
    s.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples per interval with "
                   "--interval bootstrap (default: 10000)")
    s.add_argument("--seed", type=int, default=None, help="random seed of a bootstrap (default: a fresh one "
                   "each time)")
    s.set_defaults(func=cmd_summarize)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "summarize" and args.trim < 0:
        print("kts: error: --trim must be >= 0", file=sys.stderr)
        return 2
    return run_command(lambda: args.func(args), prog="kts",
                       interrupted="interrupted; tenants stopped (a block cut short is recorded as failed; "
                                   "kts run --resume runs what is left)")

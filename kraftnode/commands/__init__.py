"""Sub-commands of the ``kraftnode`` CLI.

Each module here exposes ``NAME`` (the sub-command), ``HELP`` (one line),
``add_arguments(parser)`` and ``run(args) -> int``.  ``kraftnode.cli`` discovers
them, so adding a command never means editing the dispatcher.
"""

"""Logging for ``kraftnode start`` and ``dev-cluster``: level, file with rotation, or a config file.

* the level comes from ``--log-level``, else the ``KRAFTNODE_LOG_LEVEL`` environment variable,
  else INFO; log4j's names are accepted (TRACE, DEBUG, INFO, WARN, ERROR, FATAL) besides
  Python's, so an operator's habits carry over;
* ``kraftnode.log.file`` (server.properties) adds a size-rotated file
  (``kraftnode.log.file.max.bytes``, ``kraftnode.log.file.backups``) beside the console;
* ``--log-config FILE`` hands everything to Python's logging configuration: a JSON file is a
  ``logging.config.dictConfig`` dictionary, anything else an INI ``fileConfig`` file.

Every failure here is a :class:`LogSetupError` whose message names the problem (an
unwritable log directory, a full disk, a bad level), for the CLI's one-line exit 2.
"""

from __future__ import annotations

import errno
import json
import logging
import logging.config
import logging.handlers
import os
from pathlib import Path

from kraftnode.errors import LocalError

__all__ = ["KafkaLevelFormatter", "LogSetupError", "ENV_LEVEL", "FORMAT", "resolve_level", "configure", "os_error_text"]

ENV_LEVEL = "KRAFTNODE_LOG_LEVEL"
FORMAT = "%(asctime)s %(levelname)s [%(name)s] %(message)s"

_LEVELS = {
    "TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
    "WARN": logging.WARNING, "WARNING": logging.WARNING, "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL, "CRITICAL": logging.CRITICAL,
}
LEVEL_NAMES = ("DEBUG", "INFO", "WARN", "ERROR")


class KafkaLevelFormatter(logging.Formatter):
    """Level names as log4j prints them, as the docs and ``--log-level`` spell them: WARN
    and FATAL, not Python's WARNING and CRITICAL (issue 41). The record is left unchanged for
    any other handler."""

    _NAMES = {logging.WARNING: "WARN", logging.CRITICAL: "FATAL"}

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        name = self._NAMES.get(record.levelno)
        if name is None or record.levelname != logging.getLevelName(record.levelno):
            return super().formatMessage(record)
        saved, record.levelname = record.levelname, name
        try:
            return super().formatMessage(record)
        finally:
            record.levelname = saved


class LogSetupError(LocalError):
    """Logging cannot be set up as asked; the message names the problem."""


def os_error_text(e: OSError) -> str:
    """``strerror`` with the errno name for the common operator mistakes."""
    text = e.strerror or str(e)
    if e.errno == errno.ENOSPC:
        text += " (the disk is full)"
    return f"{e.filename}: {text}" if e.filename else text


def _reason(e: OSError) -> str:
    """``os_error_text`` without the file name (when the message names the file already)."""
    return os_error_text(OSError(e.errno, e.strerror)) if e.strerror else str(e)


def resolve_level(flag: str | None) -> int:
    """The level from ``--log-level``, else ``KRAFTNODE_LOG_LEVEL``, else INFO."""
    if flag:
        source, text = "--log-level", flag
    elif os.environ.get(ENV_LEVEL):
        source, text = ENV_LEVEL, os.environ[ENV_LEVEL]
    else:
        return logging.INFO
    level = _LEVELS.get(text.strip().upper())
    if level is None:
        raise LogSetupError(f"{source}={text!r} is not a log level: expected one of "
                            f"{', '.join(LEVEL_NAMES)}")
    return level


def configure(level: int, *, log_file: str | None = None, max_bytes: int = 100 * 1024 * 1024,
              backups: int = 10, log_config: str | None = None) -> None:
    """Replace the root logger's handlers as asked (idempotent per process)."""
    if log_config is not None:
        _from_file(log_config)
        return
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
        h.close()
    fmt = KafkaLevelFormatter(FORMAT)
    console = logging.StreamHandler()
    console.setFormatter(fmt)
    root.addHandler(console)
    root.setLevel(level)
    if log_file:
        path = Path(log_file)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fh = logging.handlers.RotatingFileHandler(path, maxBytes=max_bytes, backupCount=backups,
                                                      encoding="utf-8")
        except OSError as e:
            raise LogSetupError(f"cannot open log file {path} (kraftnode.log.file): "
                                f"{_reason(e)}") from None
        fh.setFormatter(fmt)
        root.addHandler(fh)


def _from_file(name: str) -> None:
    path = Path(name)
    try:
        text = path.read_text()
    except OSError as e:
        raise LogSetupError(f"--log-config {path}: {_reason(e)}") from None
    try:
        if path.suffix == ".json":
            logging.config.dictConfig(json.loads(text))
        else:
            logging.config.fileConfig(path, disable_existing_loggers=False)
    except OSError as e:   # a handler's file cannot be opened
        raise LogSetupError(f"--log-config {path}: {os_error_text(e)}") from None
    except (ValueError, KeyError, TypeError, AttributeError, ImportError, RuntimeError) as e:
        # dictConfig raises ValueError naming the bad entry; fileConfig KeyError/RuntimeError
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise LogSetupError(f"--log-config {path}: not a valid logging configuration: {first}") from None

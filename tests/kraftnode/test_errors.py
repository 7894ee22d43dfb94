"""Every exception kraftnode defines derives from KraftnodeError, through LocalError or
RemoteError (kraftnode/errors.py says which is which)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import kraftnode
from kraftnode.errors import ConfigError, KraftnodeError, LocalError, RemoteError


def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(kraftnode.__path__, "kraftnode."):
        if ".generated" in info.name or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == info.name:
                found[f"{info.name}.{name}"] = obj
    return found


def test_every_exception_has_the_common_base() -> None:
    classes = _exception_classes()
    missing = {name for name, cls in classes.items() if not issubclass(cls, KraftnodeError)}
    assert not missing, sorted(missing)
    for name, cls in classes.items():
        if issubclass(cls, KraftnodeError) and cls not in (KraftnodeError, LocalError, RemoteError):
            assert issubclass(cls, LocalError) != issubclass(cls, RemoteError), name


def test_configuration_errors_are_local_and_still_value_errors() -> None:
    assert issubclass(ConfigError, LocalError) and issubclass(ConfigError, ValueError)

"""Fuzz every generated decoder with hostile bytes; count the inputs tried.

Inputs come from three sources per round: random bytes, valid encodings with
random bytes overwritten, and valid encodings truncated or extended.  The only
acceptable outcomes are a successful decode or ``DecodeError``; anything else
(another exception, a hang) is a bug.  Usage::

    python -m tools.fuzz.codec_fuzz [--inputs N] [--seed S] [--seconds T]
"""

from __future__ import annotations

import argparse
import importlib
import random
import sys
import time
import traceback
import uuid
from typing import Any

from recordbatch.wire import DecodeError


def classes() -> list[Any]:
    out = []
    for pkg_name in ("kraftnode.protocol.generated", "kraftnode.protocol.generated.metadata",
                     "recordbatch.generated"):
        pkg = importlib.import_module(pkg_name)
        out += [getattr(pkg, n) for n in pkg.__all__]
    return out


_INTS = {"int8": 7, "int16": 15, "uint16": 16, "int32": 31, "uint32": 32, "int64": 63}


def _scalar(rng: random.Random, t: str) -> Any:
    if t in _INTS:
        bits = _INTS[t]
        lo, hi = (0, 2**bits - 1) if t.startswith("u") else (-(2**bits), 2**bits - 1)
        return rng.choice([lo, hi, 0, -1 if lo < 0 else 1, rng.randint(lo, hi)])
    if t == "bool":
        return rng.random() < 0.5
    if t == "float64":
        return rng.uniform(-1e9, 1e9)
    if t == "string":
        return "".join(rng.choice("ab\u00e9\u4e2d_-") for _ in range(rng.randint(0, 6)))
    if t == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    return bytes(rng.randrange(256) for _ in range(rng.randint(0, 12)))


def random_instance(rng: random.Random, cls: Any, version: int, depth: int = 0) -> Any:
    """A random valid instance of ``cls`` for ``version`` (values only where present)."""
    kwargs: dict[str, Any] = {}
    for f in cls.FIELDS:
        if not f.present_in(version):
            continue
        if f.nullable_in(version) and rng.random() < 0.2:
            kwargs[f.attr] = None
            continue
        if f.type.startswith("[]"):
            n = rng.randint(0, 3 if depth < 2 else 1)
            if f.struct is not None:
                kwargs[f.attr] = [random_instance(rng, f.struct, version, depth + 1) for _ in range(n)]
            else:
                kwargs[f.attr] = [_scalar(rng, f.type[2:]) for _ in range(n)]
        elif f.struct is not None:
            kwargs[f.attr] = random_instance(rng, f.struct, version, depth + 1)
        else:
            kwargs[f.attr] = _scalar(rng, f.type)
    return cls(**kwargs)


def sample_encodings(rng: random.Random, cls: Any, version: int) -> bytes:
    """A valid encoding to mutate: a random instance, or the default one."""
    if rng.random() < 0.2:
        return bytes(cls().encode(version))
    return bytes(random_instance(rng, cls, version).encode(version))


def mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    kind = rng.randrange(4)
    if kind == 0 and b:
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif kind == 1:
        b = b[: rng.randrange(len(b) + 1)]
    elif kind == 2:
        b += bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    else:
        # plant a huge length/count claim (0xff.. varint or int32) at a random spot
        pos = rng.randrange(len(b) + 1)
        b[pos:pos] = rng.choice([b"\xff\xff\xff\xff\x07", b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff\xff\xff"])
    return bytes(b)


def run(inputs: int, seed: int, seconds: float) -> tuple[int, int, list[str]]:
    rng = random.Random(seed)
    cls_list = classes()
    tried = decoded = 0
    failures: list[str] = []
    deadline = time.monotonic() + seconds
    while tried < inputs and time.monotonic() < deadline:
        cls = rng.choice(cls_list)
        lo, hi = cls.VALID_VERSIONS
        version = rng.randint(lo, hi)
        if rng.random() < 0.25:
            data = bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
        else:
            data = mutate(rng, sample_encodings(rng, cls, version))
        tried += 1
        try:
            cls.decode(data, version)
            decoded += 1
        except DecodeError:
            pass
        except Exception:  # noqa: BLE001 - any other exception is exactly what we hunt
            failures.append(f"{cls.NAME} v{version} {data.hex()}: {traceback.format_exc(limit=2)}")
            if len(failures) >= 10:
                break
    return tried, decoded, failures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inputs", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=120.0)
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    tried, decoded, failures = run(args.inputs, args.seed, args.seconds)
    dt = time.monotonic() - t0
    print(f"codec fuzz: {tried} inputs tried in {dt:.1f} s (seed {args.seed}); "
          f"{decoded} decoded, {tried - decoded} rejected with DecodeError, {len(failures)} failures")
    for f in failures:
        print(f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

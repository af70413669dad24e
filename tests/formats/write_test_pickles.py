"""Writes the pickles tests/formats/pickle_test.cc parses, into OUTDIR (argument):
  NAME.pkl + NAME.json   data pickles and the tree they must decode to (every array's bytes
                         as hex, dtype, shape, order), protocols 0-5, numpy 1 and numpy 2 names
  hostile_NAME.pkl + hostile_NAME.json   pickles that would run code: the substrings the
                         refusal must contain (opcode, global, byte offset)
Pickles are only written here (pickle.dumps), never loaded."""
import collections
import json
import os
import pickle
import pickletools
import struct
import subprocess
import sys
import types

import numpy as np

out = sys.argv[1]
marker = os.path.join(out, "MARKER")


def tree(v):
    """The expected decoding of `v` as JSON."""
    if v is None:
        return {"t": "none"}
    if isinstance(v, (bool, np.bool_)):
        return {"t": "bool", "v": bool(v)}
    if isinstance(v, (int, np.integer)):
        return {"t": "int", "v": str(int(v))}
    if isinstance(v, (float, np.floating)):
        return {"t": "float", "hex": struct.pack("<d", float(v)).hex()}
    if isinstance(v, str):
        return {"t": "str", "hex": v.encode("utf-8", "surrogatepass").hex()}
    if isinstance(v, bytes):
        return {"t": "bytes", "hex": v.hex()}
    if isinstance(v, np.ndarray):
        fortran = bool(v.flags.f_contiguous and not v.flags.c_contiguous)
        return {"t": "ndarray", "dtype": v.dtype.name, "shape": list(v.shape), "fortran": fortran,
                "hex": v.tobytes("F" if fortran else "C").hex()}
    if isinstance(v, dict):
        return {"t": "dict", "items": [[tree(k), tree(x)] for k, x in v.items()]}
    if isinstance(v, (set, frozenset)):
        return {"t": "set", "items": [tree(x) for x in v]}
    if isinstance(v, (list, tuple)):
        return {"t": type(v).__name__, "items": [tree(x) for x in v]}
    raise TypeError(type(v))


def write(name, data, expected):
    with open(os.path.join(out, name + ".pkl"), "wb") as f:
        f.write(data)
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(expected, f)


rng = np.random.default_rng(7)
base = np.arange(24, dtype=np.float32).reshape(4, 6) * 0.5 - 3
state = collections.OrderedDict()
state["f16"] = rng.standard_normal((3, 5)).astype(np.float16)
state["f32"] = rng.standard_normal((4, 3)).astype(np.float32)
state["f64"] = np.array([1.0, -0.0, np.inf, np.nan, 1e-310])
state["i32"] = np.array([-(2 ** 31), 2 ** 31 - 1, 0, 7], dtype=np.int32)
state["i64"] = np.arange(-3, 9, dtype=np.int64).reshape(3, 2, 2)
state["u8"] = np.arange(250, 256, dtype=np.uint8)
state["bool"] = np.array([[True, False], [False, True]])
state["fortran"] = np.asfortranarray(base)
state["fortran_i8"] = np.asfortranarray(np.arange(6, dtype=np.int8).reshape(2, 3))
state["zero_d"] = np.array(3.25, dtype=np.float32)
state["strided"] = base[:, ::2]
state["strided_rows"] = np.arange(10, dtype=np.int32)[::3]
state["shared"] = state["f32"]  # the same object twice: one memo entry
state["metadata"] = np.arange(3, dtype=np.dtype("f4", metadata={"unit": "m"}))  # dtype state v4
state["scalar_f32"] = np.float32(1.5)
state["scalar_i64"] = np.int64(3)
state["scalar_bool"] = np.bool_(True)
data = {
    "state": state,
    "config": {"lr": 3e-4, "layers": [1, 2, (3, None)], "name": "n\u00e9edle \u2713 \U0001F600",
               "escapes": "back\\slash\nnew line\t\x00", "flags": (True, False, None),
               "ints": [0, 1, -1, 255, 256, 65535, 65536, -(2 ** 31), 2 ** 31, 2 ** 62,
                        2 ** 63 - 1, -(2 ** 63)],
               "floats": [0.0, -0.0, 1.5, -2.25e300, float("inf"), float("-inf")],
               "raw": b"\x00\x01\xfe\xff",
               7: "int key", (1, "t"): "tuple key"},
    "nested": [[[], {}], ((),), {"deep": {"deeper": [1]}}],
}
for proto in range(6):
    if proto >= 4:  # EMPTY_SET / FROZENSET; before protocol 4 sets are builtins.set(list)
        data["config"]["set"] = {1, 2, "a"}
        data["config"]["frozen"] = frozenset([(1, 2)])
    write("data_p%d" % proto, pickle.dumps(data, protocol=proto), tree(data))


# numpy 2 names (numpy._core.*) from numpy 1.24: stand-in modules whose functions carry the
# numpy 2 module names, and a Pickler that reduces arrays and scalars through them.
def numpy2_module(name, **funcs):
    m = types.ModuleType(name)
    for fname, real in funcs.items():
        def f(*a, _real=real):
            return _real(*a)
        f.__module__, f.__name__, f.__qualname__ = name, fname, fname
        setattr(m, fname, f)
    sys.modules[name] = m
    return m


core = types.ModuleType("numpy._core")
sys.modules["numpy._core"] = core
ma = numpy2_module("numpy._core.multiarray", _reconstruct=np.core.multiarray._reconstruct,
                   scalar=np.core.multiarray.scalar)
nu = numpy2_module("numpy._core.numeric", _frombuffer=np.core.numeric._frombuffer)
renames = {np.core.multiarray._reconstruct: ma._reconstruct, np.core.multiarray.scalar: ma.scalar,
           np.core.numeric._frombuffer: nu._frombuffer}


class Numpy2Pickler(pickle.Pickler):
    def __init__(self, f, protocol):
        super().__init__(f, protocol=protocol)
        self.proto = protocol

    def reducer_override(self, obj):
        if isinstance(obj, (np.ndarray, np.generic)) and not isinstance(obj, np.dtype):
            r = obj.__reduce_ex__(self.proto)
            if isinstance(r, tuple) and r[0] in renames:
                return (renames[r[0]],) + tuple(r[1:])
        return NotImplemented


import io
for proto in range(6):
    buf = io.BytesIO()
    Numpy2Pickler(buf, protocol=proto).dump(state)
    blob = buf.getvalue()
    assert b"numpy._core" in blob and b"numpy.core" not in blob, proto
    write("numpy2_p%d" % proto, blob, tree(state))


# Hostile pickles. The refusal must name the opcode, the global and the opcode's offset.
def first_global(blob, names):
    """(opcode name, offset) of the first GLOBAL / STACK_GLOBAL naming one of `names`."""
    strings = []
    for op, arg, pos in pickletools.genops(blob):
        if op.name == "GLOBAL" and arg.replace(" ", ".") in names:
            return op.name, pos, arg.replace(" ", ".")
        if op.name == "STACK_GLOBAL" and ".".join(strings[-2:]) in names:
            return op.name, pos, ".".join(strings[-2:])
        if isinstance(arg, str) and "UNICODE" in op.name:
            strings.append(arg)
    raise AssertionError(names)


class Reduces:
    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


import builtins
hostile = {
    "os_system": (os.system, ("touch " + marker,), {"os.system", "posix.system"}),
    "eval": (eval, ("open(%r, 'w')" % marker,), {"builtins.eval", "__builtin__.eval"}),
    "exec": (builtins.exec, ("open(%r, 'w')" % marker,), {"builtins.exec", "__builtin__.exec"}),
    "popen": (subprocess.Popen, (["touch", marker],), {"subprocess.Popen", "commands.Popen"}),
    "numpy_load": (np.load, (marker,), {"numpy.load"}),
}
for name, (fn, args, names) in hostile.items():
    for proto in (0, 2, 4, 5):
        blob = pickle.dumps({"weights": [1, Reduces(fn, args)]}, protocol=proto)
        op, pos, g = first_global(blob, names)
        write("hostile_%s_p%d" % (name, proto), blob,
              ["pickle opcode %s at offset %d: " % (op, pos), "global '%s' is not allowed" % g])

# _reconstruct called with a class other than numpy.ndarray (an allowed one, so the check
# that fires is the class check).
for proto in (2, 4):
    blob = pickle.dumps([Reduces(np.core.multiarray._reconstruct,
                                 (collections.OrderedDict, (0,), b"b"))], protocol=proto)
    reduce_at = [pos for op, arg, pos in pickletools.genops(blob) if op.name == "REDUCE"][-1]
    write("hostile_reconstruct_class_p%d" % proto, blob,
          ["pickle opcode REDUCE at offset %d: " % reduce_at, "not numpy.ndarray"])

# Big-endian arrays: refused at the dtype's BUILD (its state names the byte order '>').
for proto in (2, 4):
    blob = pickle.dumps({"be": np.arange(3, dtype=">i2")}, protocol=proto)
    build_at = [pos for op, arg, pos in pickletools.genops(blob) if op.name == "BUILD"][0]
    write("hostile_bigendian_p%d" % proto, blob,
          ["pickle opcode BUILD at offset %d: " % build_at, "big-endian arrays are not supported"])

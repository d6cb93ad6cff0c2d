"""braze's own launcher for compiled Triton kernels: one C extension for every kernel.

Takes: a Triton ``CompiledKernel`` (compiled, not yet loaded) and its device.
Gives: ``prepare(kernel, device)``, which loads the binary and says whether
``launch`` can run it, and ``launch(function, grid_x, grid_y, grid_z, threads,
shared, stream, device, extra, *pointers)``, the call a launcher makes. ``start()``
builds the extension in a thread (the backend calls it when a CUDA graph
arrives); ``enabled()`` waits for that build and says whether it worked;
``expected()`` does not wait (compile jobs ask it).

Why: Triton builds a C launcher per distinct kernel signature, a C compile that
is about half of a typical kernel's compile job (docs/benchmarks.md, "Where
compile time goes"; a launch through it also costs more host time: ``python -m
benchmarks.launch_overhead``). braze's kernels take pointers
only, so one launcher serves them all: built once per machine (cached on disk
by its source, the compiler's identity as the C++ backend computes it, and the
Python ABI), it packs each pointer (a tensor's ``data_ptr()`` or an int) and
calls ``cuLaunchKernel``. It skips Triton's per-pointer ``cuPointerGetAttribute``
check: braze's guards already put every tensor on the kernel's device.

A kernel is launched here only when it needs nothing more: one CTA per program,
no cooperative or programmatic launch, no scratch memory, pointer and constexpr
arguments only, and a parameter list the driver confirms (``cuFuncGetParamInfo``:
the pointers, then ``extra`` 8-byte scratch pointers Triton appends, passed as
null). Anything else, a driver without that call or a build that fails, goes
through Triton's own launcher. ``config.native_launch`` turns it off.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import sysconfig
import threading

from braze import config
from braze.codegen.host_compiler import CompileError, compiler_identity
from braze.runtime import cache

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>

typedef int CUresult;
typedef void *CUfunction, *CUstream, *CUcontext;
typedef int CUdevice;
typedef CUresult (*launch_t)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void **, void **);
typedef CUresult (*ctx_get_t)(CUcontext *);
typedef CUresult (*ctx_set_t)(CUcontext);
typedef CUresult (*retain_t)(CUcontext *, CUdevice);
typedef CUresult (*device_get_t)(CUdevice *, int);
typedef CUresult (*error_string_t)(CUresult, const char **);
typedef CUresult (*param_info_t)(CUfunction, size_t, size_t *, size_t *);

#define MAX_PARAMS 512
static launch_t cu_launch;
static ctx_get_t cu_ctx_get;
static ctx_set_t cu_ctx_set;
static retain_t cu_retain;
static device_get_t cu_device_get;
static error_string_t cu_error_string;
static param_info_t cu_param_info;
static PyObject *data_ptr_name;

static PyObject *cuda_error(CUresult code, const char *what) {
  const char *text = "unknown error";
  if (cu_error_string) cu_error_string(code, &text);
  return PyErr_Format(PyExc_RuntimeError, "braze: %s failed: CUDA error %d (%s)", what, code, text);
}

static int ensure_context(int device) {
  CUcontext ctx = NULL;
  CUresult rc = cu_ctx_get(&ctx);
  if (rc == 0 && ctx) return 0;
  CUdevice dev;
  if (rc == 0) rc = cu_device_get(&dev, device);
  if (rc == 0) rc = cu_retain(&ctx, dev);
  if (rc == 0) rc = cu_ctx_set(ctx);
  if (rc) cuda_error(rc, "making the device's context current");
  return rc;
}

static int pointer_of(PyObject *obj, uint64_t *out) {
  if (obj == Py_None) { *out = 0; return 0; }
  if (PyLong_Check(obj)) { *out = PyLong_AsUnsignedLongLong(obj); return PyErr_Occurred() ? -1 : 0; }
  PyObject *value = PyObject_CallMethodNoArgs(obj, data_ptr_name);
  if (!value) return -1;
  *out = PyLong_AsUnsignedLongLong(value);
  Py_DECREF(value);
  return PyErr_Occurred() ? -1 : 0;
}

/* launch(function, grid_x, grid_y, grid_z, threads, shared, stream, device, extra, *pointers) */
static PyObject *launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  uint64_t values[MAX_PARAMS];
  void *params[MAX_PARAMS];
  if (nargs < 9) return PyErr_Format(PyExc_TypeError, "braze launch: %zd arguments, at least 9 needed", nargs);
  CUfunction function = PyLong_AsVoidPtr(args[0]);
  unsigned long grid_x = PyLong_AsUnsignedLong(args[1]), grid_y = PyLong_AsUnsignedLong(args[2]);
  unsigned long grid_z = PyLong_AsUnsignedLong(args[3]), threads = PyLong_AsUnsignedLong(args[4]);
  unsigned long shared = PyLong_AsUnsignedLong(args[5]);
  CUstream stream = PyLong_AsVoidPtr(args[6]);
  int device = (int)PyLong_AsLong(args[7]);
  Py_ssize_t extra = PyLong_AsSsize_t(args[8]), count = nargs - 9;
  if (PyErr_Occurred()) return NULL;
  if (extra < 0 || count + extra > MAX_PARAMS)
    return PyErr_Format(PyExc_ValueError, "braze launch: %zd parameters, at most %d", count + extra, MAX_PARAMS);
  for (Py_ssize_t i = 0; i < count; ++i) {
    if (pointer_of(args[9 + i], &values[i])) return NULL;
    params[i] = &values[i];
  }
  for (Py_ssize_t i = count; i < count + extra; ++i) { values[i] = 0; params[i] = &values[i]; }
  if (grid_x * grid_y * grid_z == 0) Py_RETURN_NONE;
  if (ensure_context(device)) return NULL;
  CUresult rc;
  Py_BEGIN_ALLOW_THREADS;
  rc = cu_launch(function, grid_x, grid_y, grid_z, threads, 1, 1, shared, stream, params, NULL);
  Py_END_ALLOW_THREADS;
  if (rc) return cuda_error(rc, "cuLaunchKernel");
  Py_RETURN_NONE;
}

/* param_sizes(function): the byte size of each kernel parameter, or None when the driver cannot say */
static PyObject *param_sizes(PyObject *self, PyObject *arg) {
  CUfunction function = PyLong_AsVoidPtr(arg);
  if (PyErr_Occurred()) return NULL;
  if (!cu_param_info) Py_RETURN_NONE;
  PyObject *sizes = PyList_New(0);
  for (size_t i = 0; sizes && i < MAX_PARAMS; ++i) {
    size_t offset, size;
    if (cu_param_info(function, i, &offset, &size)) break;
    PyObject *value = PyLong_FromSize_t(size);
    if (!value || PyList_Append(sizes, value)) Py_CLEAR(sizes);
    Py_XDECREF(value);
  }
  return sizes;
}

static PyMethodDef methods[] = {
  {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL, "launch a kernel taking pointers"},
  {"param_sizes", param_sizes, METH_O, "the byte size of each parameter of a kernel"},
  {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "braze_triton_launch", NULL, -1, methods};

PyMODINIT_FUNC PyInit_braze_triton_launch(void) {
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!cuda) return PyErr_Format(PyExc_ImportError, "braze launch: libcuda.so.1: %s", dlerror());
  cu_launch = (launch_t)dlsym(cuda, "cuLaunchKernel");
  cu_ctx_get = (ctx_get_t)dlsym(cuda, "cuCtxGetCurrent");
  cu_ctx_set = (ctx_set_t)dlsym(cuda, "cuCtxSetCurrent");
  cu_retain = (retain_t)dlsym(cuda, "cuDevicePrimaryCtxRetain");
  cu_device_get = (device_get_t)dlsym(cuda, "cuDeviceGet");
  cu_error_string = (error_string_t)dlsym(cuda, "cuGetErrorString");
  cu_param_info = (param_info_t)dlsym(cuda, "cuFuncGetParamInfo");
  if (!cu_launch || !cu_ctx_get || !cu_ctx_set || !cu_retain || !cu_device_get)
    return PyErr_Format(PyExc_ImportError, "braze launch: libcuda.so.1 lacks a launch function");
  data_ptr_name = PyUnicode_InternFromString("data_ptr");
  return data_ptr_name ? PyModule_Create(&module) : NULL;
}
"""

NAME = "braze_triton_launch"
_lock = threading.Lock()
_state: dict = {}  # "thread": the build's thread; "module": the extension, or None when it failed; "error"


def start() -> None:
    """Build (or load from the cache) the extension in a thread, once per process."""
    with _lock:
        if "thread" not in _state and config.native_launch:
            _state["thread"] = threading.Thread(target=_build_and_load, daemon=True, name="braze-launcher-build")
            _state["thread"].start()


def enabled() -> bool:
    """Whether kernels launch through the extension (waits for its build)."""
    if not config.native_launch:
        return False
    start()
    _state["thread"].join()
    return _state.get("module") is not None


def expected() -> bool:
    """Whether kernels will launch through the extension, without waiting for its build
    (compile jobs then skip Triton's launcher; should the build fail, Triton's is built
    when the kernel is loaded)."""
    if not config.native_launch:
        return False
    start()
    return _state["thread"].is_alive() or _state.get("module") is not None


def launch_function():
    return _state["module"].launch


def prepare(kernel, device_index: int) -> bool:
    """Load ``kernel``'s binary without Triton's launcher, if ``launch`` can run it; False
    leaves the kernel untouched (Triton loads it, with its launcher)."""
    if not enabled() or not _launchable(kernel):
        return False
    from triton.compiler.compiler import max_shared_mem
    from triton.runtime.driver import driver
    meta = kernel.metadata
    if meta.shared > max_shared_mem(device_index):
        return False  # Triton raises its OutOfResources
    module, function, n_regs, n_spills, n_max_threads = driver.active.utils.load_binary(
        kernel.name, kernel.kernel, meta.shared, device_index)
    sizes = _state["module"].param_sizes(function)
    pointers = sum(1 for t in kernel.src.signature.values() if t != "constexpr")
    extra = len(sizes or []) - pointers
    if sizes is None or not 0 <= extra <= 2 or any(s != 8 for s in sizes) or meta.num_warps * 32 > n_max_threads:
        return False
    kernel.module, kernel.function, kernel.n_regs, kernel.n_spills = module, function, n_regs, n_spills
    kernel.n_max_threads = n_max_threads
    kernel.braze_launch = (32 * meta.num_warps, meta.shared, extra)
    return True


def _launchable(kernel) -> bool:
    meta = kernel.metadata
    signature = getattr(kernel.src, "signature", None) or {}
    return (getattr(meta, "num_ctas", 1) == 1 and not getattr(meta, "launch_cooperative_grid", False)
            and not getattr(meta, "launch_pdl", False) and not getattr(meta, "global_scratch_size", 0)
            and not getattr(meta, "profile_scratch_size", 0) and not getattr(meta, "tensordesc_meta", None)
            and all(t == "constexpr" or t.startswith("*") for t in signature.values()))


def _build_and_load() -> None:
    try:
        include = sysconfig.get_paths()["include"]
        key = cache.key_of(NAME, SOURCE, compiler_identity(config.cxx), sys.version, include)
        path = cache.lookup(key, ".so") or cache.store(key, ".so", _compile)
        loader = importlib.machinery.ExtensionFileLoader(NAME, path)
        spec = importlib.util.spec_from_file_location(NAME, path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        _state["module"] = module
    except Exception as exc:  # Triton's launchers take over; the reason stays in _state["error"]
        _state["module"], _state["error"] = None, f"{type(exc).__name__}: {exc}"


def _compile(out: str) -> None:
    src = out + ".c"
    with open(src, "w") as f:
        f.write(SOURCE)
    cmd = [config.cxx, "-O2", "-shared", "-fPIC", "-w", "-x", "c", src,
           f"-I{sysconfig.get_paths()['include']}", "-o", out, "-ldl"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    finally:
        os.unlink(src)
    if proc.returncode:
        raise CompileError(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")

"""Prints what the GPU machine has (versions, device attributes, NVRTC bindings) as JSON. Used once per device session."""
import json, os, subprocess, sys

info = {}
def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=60).stdout.strip()
    except Exception as e:  # noqa: BLE001 - a probe reports whatever failed
        return f"error: {e}"

info["nvidia_smi"] = sh("nvidia-smi --query-gpu=name,driver_version,pci.bus_id,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.limit,pcie.link.gen.max,pcie.link.width.max,memory.total --format=csv")
info["ncu"] = sh("ncu --version | tail -1")
info["nvcc"] = sh("nvcc --version | tail -2")
for mod in ("torch", "triton", "cupy", "pynvml", "polars", "typer", "cuda.core", "cuda.bindings", "numpy", "pandas", "pyarrow", "tqdm", "rich"):
    try:
        m = __import__(mod, fromlist=["_"])
        info[f"v_{mod}"] = getattr(m, "__version__", "present")
    except Exception as e:  # noqa: BLE001
        info[f"v_{mod}"] = f"missing: {e}"
try:
    import cupy
    props = cupy.cuda.runtime.getDeviceProperties(0)
    info["cupy_props"] = {k: (v.decode(errors="replace") if isinstance(v, bytes) else v) for k, v in props.items()
                          if isinstance(v, (int, float, str, bytes))}
    src = open("collectors/bench/kernels/chapter5.cuh").read()
    mod = cupy.RawModule(code=src, options=("-std=c++17",))
    k = mod.get_function("ks_colread4")
    info["cupy_nvrtc"] = f"ok: ks_colread4 regs={k.num_regs}"
except Exception as e:  # noqa: BLE001
    info["cupy_error"] = repr(e)
try:
    import torch
    p = torch.cuda.get_device_properties(0)
    info["torch_props"] = {k: getattr(p, k) for k in dir(p) if not k.startswith("_") and isinstance(getattr(p, k), (int, float, str))}
except Exception as e:  # noqa: BLE001
    info["torch_error"] = repr(e)
json.dump(info, open(sys.argv[1], "w"), indent=1, default=str)
print(json.dumps({k: v for k, v in info.items() if not k.endswith("props")}, indent=1, default=str))
